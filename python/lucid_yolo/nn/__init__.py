"""lucid's networks in PyTorch (the deployment formats traced from a Python module): built from the
model dict of lucid weights with the C++ model's state-dict names; see network.py and deploy.py.
This subpackage imports torch (and safetensors to read weights) only, not the native module."""
from .deploy import LAYOUTS, DeployedNetwork, default_layout
from .network import SegmentationNetwork, load_network, read_weights

__all__ = ["LAYOUTS", "DeployedNetwork", "SegmentationNetwork", "default_layout", "load_network", "read_weights"]
