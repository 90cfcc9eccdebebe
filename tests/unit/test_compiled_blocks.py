"""The template's blocks for a lone sentence's few rows (``decode/compiled.py``: ``FEW_ROWS``):
inductor's own choice of micro-kernel picks them while a graph compiles, and only then, and a
product compiled with them computes what the eager one does."""

from __future__ import annotations

import re
import zipfile
from types import SimpleNamespace

import pytest
import torch

from transformer_mt.decode.compiled import FEW_ROWS, INDUCTOR_OPTIONS, few_row_blocks

# inductor's code generators, imported here (elsewhere they run in processes of their own);
# they warn that `torch.jit.script_method` "is deprecated" (3.14: "is not supported")
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is")


def isa_of(vec: object) -> str:
    """The name FEW_ROWS gives inductor's vector ISA ``vec`` ("" for others)."""
    from torch._inductor.cpu_vec_isa import VecAVX2, VecAVX512

    return "avx512" if isinstance(vec, VecAVX512) else "avx2" if isinstance(vec, VecAVX2) else ""


def supported(isa: str) -> bool:
    from torch._inductor.cpu_vec_isa import valid_vec_isa_list

    return any(isa_of(vec) == isa for vec in valid_vec_isa_list())


def chosen(rows: int, n: int, k: int, dtype: torch.dtype) -> tuple[int, int]:
    """The (rows, columns) block inductor's template chooses for a product of ``rows`` x ``k``
    by ``k`` x ``n`` in ``dtype`` (fp32 sums) on 2 threads, at the ISA ``pick_vec_isa`` picks."""
    import torch._inductor.compile_fx  # (imports the code generators in their order)
    from torch._inductor.codegen.cpp_micro_gemm import create_micro_gemm
    from torch._inductor.virtualized import V

    sizes = SimpleNamespace(sizevars=SimpleNamespace(optimization_hint=lambda m, fallback: m))
    with V.set_graph_handler(sizes):  # the sizes are numbers here: no graph to ask
        gemm = create_micro_gemm("product", rows, n, k, dtype, dtype, output_dtype=torch.float,
                                 num_threads=2)
    return tuple(gemm.register_blocking[:2])


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_the_few_row_blocks_are_chosen_while_their_graph_compiles(monkeypatch, isa):
    if not supported(isa):
        pytest.skip(f"this CPU has no {isa}")
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", isa)  # inductor's ISA, as for its kernels
    dtypes = [torch.float] + ([] if torch.cpu._is_amx_tile_supported() else [torch.bfloat16])
    shapes = [(n, k, dtype) for dtype in dtypes  # the decoder's, the output layer's odd width
              for n, k in ((1024, 256), (6190, 256), (256, 1024))]
    for graph, rows in (("one", 1), ("beam", 3)):  # the beam graph's example has 3 rows
        own = {shape: chosen(rows, *shape) for shape in shapes}
        with few_row_blocks(graph):
            for shape in shapes:
                assert chosen(rows, *shape) == FEW_ROWS[graph].get(isa, own[shape])
        assert {shape: chosen(rows, *shape) for shape in shapes} == own  # and then no more
        if isa in FEW_ROWS[graph]:
            assert own[1024, 256, torch.float] != FEW_ROWS[graph][isa]  # inductor's are others
    batch = chosen(32, 1024, 256, torch.float)
    with few_row_blocks("batch"):  # a graph of many rows keeps inductor's blocks
        assert chosen(32, 1024, 256, torch.float) == batch


def test_a_product_compiled_with_the_one_row_block_computes_what_eager_does(tmp_path):
    """One row by a 256 x 1,024 layer compiled ahead of time as the lone sentence's graph is,
    with its block (found in the generated code), equals the eager product to rounding."""
    from torch._inductor.cpu_vec_isa import pick_vec_isa

    isa = isa_of(pick_vec_isa())
    if isa not in FEW_ROWS["one"]:
        pytest.skip("no one-row block for this CPU's vectors")
    torch.manual_seed(0)
    layer, x = torch.nn.Linear(256, 1024).eval(), torch.randn(1, 256)
    with torch.inference_mode():
        program = torch.export.export(layer, (x,))
        with few_row_blocks("one"):
            package = torch._inductor.aoti_compile_and_package(
                program, package_path=str(tmp_path / "one.pt2"),
                inductor_configs=dict(INDUCTOR_OPTIONS))
        compiled = torch._inductor.aoti_load_package(package)
        torch.testing.assert_close(compiled(x), layer(x), rtol=1e-5, atol=1e-5)
    with zipfile.ZipFile(package) as files:
        code = "".join(files.read(name).decode() for name in files.namelist()
                       if name.endswith(".cpp"))
    blocks = {(int(m), int(n)) for m, n in re.findall(r"_kernel<(\d+), (\d+),", code)}
    assert blocks == {FEW_ROWS["one"][isa]}
