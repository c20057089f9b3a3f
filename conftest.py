"""Collection for the whole tree: the optional torch adapter's doctests need PyTorch."""

import importlib.util

collect_ignore = [] if importlib.util.find_spec("torch") is not None else ["coded_shuffle/torch.py"]
