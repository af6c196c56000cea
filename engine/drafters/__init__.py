"""Tree builders: method name -> (config dataclass, build function).

`build(draft: TreeBuilder, state: DecodeState, cfg, gen: torch.Generator) -> Tree`; configs
are frozen dataclasses with the papers' parameter names and defaults.
"""

from engine.drafters import (autoregressive, beam, ddtree, delayed, dynatree, dyspec, fixed_tree,
                             iid, linear, salf, sequoia, specinfer)

DRAFTERS = {
    "autoregressive": (autoregressive.AutoregressiveConfig, autoregressive.build),
    "linear": (linear.LinearConfig, linear.build),
    "fixed_tree": (fixed_tree.FixedTreeConfig, fixed_tree.build),
    "iid": (iid.IIDConfig, iid.build),
    "delayed": (delayed.DelayedConfig, delayed.build),
    "dynatree": (dynatree.DynaTreeConfig, dynatree.build),
    "dyspec": (dyspec.DySpecConfig, dyspec.build),
    "salf": (salf.SALFConfig, salf.build),
    "beam": (beam.BeamConfig, beam.build),
    "ddtree": (ddtree.DDTreeConfig, ddtree.build),
    "specinfer": (specinfer.SpecInferConfig, specinfer.build),
    "sequoia": (sequoia.SequoiaConfig, sequoia.build),
}
