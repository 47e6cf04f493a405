"""A small hand-written catalog covering every status, used by the core suite."""

from __future__ import annotations

from opcheck.db.data import (
    CatalogData,
    DeprecationRec,
    KernelFacts,
    KernelRec,
    OperatorRec,
    PythonRec,
    ReleaseRec,
)

NPU_BOTH = KernelFacts(op_api=True, acl_op=True)
NPU_ACLNN = KernelFacts(op_api=True, aclnn="aclnnIsIn")
NPU_ACL = KernelFacts(acl_op=True)
NATIVE = KernelFacts(native=True)
TOCPU = KernelFacts(status="tocpu")


def small_catalog() -> CatalogData:
    d = CatalogData()
    op_src = d.add_source("pytorch", "torchgen/packaged/ATen/native/native_functions.yaml")
    k111 = d.add_source("opplugin", "github/Ascend/op-plugin/5d116fc/op_plugin/config/v1r11/op_plugin_functions.yaml")
    k21 = d.add_source("opplugin", "github/Ascend/op-plugin/65b69b6/op_plugin/config/op_plugin_functions.yaml")
    w21 = d.add_source("wheel", "pypi/torch-npu/2.1.0.post17/torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml")
    w26 = d.add_source("wheel", "pypi/torch-npu/2.6.0.post5/torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml")
    m = d.add_source("releases", "github/Ascend/pytorch/master/COMPATIBILITY.md")
    rels = [
        ReleaseRec("1.11.0.post8", "1.11.0", "5.0.0", "7.0.0", "3.7,3.8", "v5.0.0-pytorch1.11.0",
                   sort_key=0, has_cpu_fallback=False, kernel_source="op_plugin", source_id=m,
                   kernel_source_id=k111, native_source_id=k111),
        ReleaseRec("2.1.0.post10", "2.1.0", "6.0.0", "8.0.0", "3.8,3.9", "v6.0.0-pytorch2.1.0",
                   sort_key=1, has_cpu_fallback=True, kernel_source="op_plugin", source_id=m,
                   kernel_source_id=k21, native_source_id=k21),
        ReleaseRec("2.1.0.post17", "2.1.0", "7.2.0", "8.3.RC1", "3.8,3.9", "v7.2.0-pytorch2.1.0",
                   sort_key=2, has_cpu_fallback=True, kernel_source="wheel", source_id=m,
                   kernel_source_id=w21, native_source_id=w21),
        ReleaseRec("2.4.0", "2.4.0", "6.0.rc3", "8.0.RC3", sort_key=3, has_cpu_fallback=True,
                   kernel_source="none", source_id=m),
        ReleaseRec("2.6.0.post5", "2.6.0", "7.3.0", "8.5.0", "3.9,3.10,3.11", "v7.3.0-pytorch2.6.0",
                   sort_key=4, has_cpu_fallback=True, kernel_source="wheel", source_id=m,
                   kernel_source_id=w26, native_source_id=w26),
    ]
    d.releases = rels
    ops = [
        ("aten::add.Tensor", "backend", "aten::add.out", "CPU,CUDA"),
        ("aten::add.out", "backend", "", "CPU,CUDA"),
        ("aten::linear", "CompositeImplicitAutograd", "", ""),
        ("aten::isin.Tensor_Tensor", "backend", "aten::isin.Tensor_Tensor_out", ""),
        ("aten::isin.Tensor_Tensor_out", "backend", "", "CPU,CUDA"),
        ("aten::relu", "backend", "", "CPU,CUDA"),
        ("aten::expand", "CompositeExplicitAutograd", "", "CompositeExplicitAutograd"),
        ("aten::_sparse_sum_backward", "backend", "", "SparseCPU,SparseCUDA"),
        ("aten::empty_strided", "backend", "", "CPU,CUDA,Meta"),
    ]
    for op, kind, delegate, dispatch in ops:
        ns, _, base = op.partition("::")
        name, _, overload = base.partition(".")
        d.operators.append(OperatorRec(op, ns, name, overload, f"{base}(Tensor self) -> Tensor",
                                       "", dispatch, kind, delegate, op_src))
    d.operators.append(OperatorRec("npu::npu_gelu", "npu", "npu_gelu", "",
                                   "npu_gelu(Tensor self) -> Tensor", "", "", "", "", k21))
    grid = {
        "aten::add.out": {"1.11.0.post8": NPU_ACL, "2.1.0.post10": NPU_BOTH,
                          "2.1.0.post17": NPU_BOTH, "2.6.0.post5": NPU_BOTH},
        "aten::relu": {"1.11.0.post8": NPU_ACL, "2.1.0.post10": NPU_BOTH,
                       "2.1.0.post17": NPU_BOTH, "2.6.0.post5": NPU_BOTH},
        "aten::isin.Tensor_Tensor_out": {"1.11.0.post8": TOCPU, "2.6.0.post5": NPU_ACLNN},
        "aten::empty_strided": {r: NATIVE for r in
                                ("1.11.0.post8", "2.1.0.post10", "2.1.0.post17", "2.6.0.post5")},
        "npu::npu_gelu": {"2.1.0.post10": NPU_ACLNN, "2.1.0.post17": NPU_ACLNN,
                          "2.6.0.post5": NPU_ACLNN},
    }
    by_rel = {r.torch_npu: r for r in rels}
    for op, per in grid.items():
        for rel, facts in per.items():
            r = by_rel[rel]
            sid = r.native_source_id if facts.native else r.kernel_source_id
            d.kernels.append(KernelRec(op, rel, facts, sid))
    d.deprecations.append(DeprecationRec("npu::npu_silu", "torch.nn.functional.silu", k21))
    d.pythons += [PythonRec("2.1.0", "3.8", m), PythonRec("2.1.0", "3.9", m)]
    d.meta = {"torch_version": "2.13.0"}
    return d
