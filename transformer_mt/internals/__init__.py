"""The private APIs of other packages that transformer_mt calls, one module per package, each
with the versions it was tested on and what runs instead on any other version."""
