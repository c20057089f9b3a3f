"""Collection for the whole tree: the doctests of optional extras need them (the torch adapter's
PyTorch, the Arrow record source's pyarrow)."""

import importlib.util

collect_ignore = [
    path
    for module, path in (("torch", "coded_shuffle/torch.py"), ("pyarrow", "coded_shuffle/records/arrow.py"))
    if importlib.util.find_spec(module) is None
]
