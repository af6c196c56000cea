"""A sweep's `hardware:` key (orchestrator/spec/hardware.py, orchestrator/hardware.py): parsed
strictly (one string or a list; any case, one canonical spelling; duplicates, non-types and a
contradicting `device:` refused), each config once per type with its device resolved, the type
in the trial's hash and label, and a sweep without the key exactly as before it existed."""

from __future__ import annotations

from collections import Counter

import pytest

from orchestrator.hardware import canonical, gpu_type, hardware_problem, node_types
from orchestrator.records import TrialConfig
from orchestrator.spec import SpecError, load_sweep
from orchestrator.spec.limits import grid_size

BODY = """\
name: hw
pairs: [{target: tiny-llama, draft: tiny-llama-draft}]
dataset: {name: spec_bench, prompts: 1, prompt_tokens: 8}
max_new_tokens: 4
methods:
  - name: autoregressive
  - name: linear
    grid: {k: [1, 2]}
"""


def _load(tmp_path, extra: str = "", name: str = "s"):
    p = tmp_path / f"{name}.yaml"
    p.write_text(BODY + extra)
    return load_sweep(p)


@pytest.mark.parametrize(
    "value, parsed",
    [
        ("H100", ("H100",)),
        ("h100", ("H100",)),
        ("[a100, H100, CPU]", ("A100", "H100", "cpu")),
        ("[a10g, l4]", ("A10G", "L4")),
        ("[GeForce-RTX-4090]", ("GEFORCE-RTX-4090",)),  # a type Ray does not list: its shape
    ],
)
def test_values_parse_to_one_spelling(tmp_path, value, parsed):
    sweep, trials = _load(tmp_path, f"hardware: {value}\n")
    assert sweep.hardware == parsed
    assert sweep.to_dict()["hardware"] == list(parsed)
    assert [t.hardware for t in trials[: len(parsed)]] == list(parsed)


@pytest.mark.parametrize(
    "extra, needle",
    [
        ("hardware: []\n", "hardware: empty list"),
        ("hardware: [H100, h100]\n", "hardware[1]: H100 is listed twice"),
        ("hardware: [cpu, CPU]\n", "hardware[1]: cpu is listed twice"),
        ("hardware: [H100, gpu]\n", "hardware[1]: 'gpu' is not a hardware type"),
        ("hardware: cuda\n", "hardware: 'cuda' is not a hardware type"),
        ("hardware: [H 100]\n", "hardware[0]: 'H 100' is not a hardware type"),
        ("hardware: [1]\n", "hardware[0]: expected a hardware type"),
        ("hardware: {H100: 1}\n", "hardware: expected a hardware type"),
        ("hardware: [H100]\ndevice: cpu\n", "device: 'cpu' cannot run hardware H100"),
        ("hardware: [cpu]\ndevice: cuda\n", "device: 'cuda' cannot run hardware cpu"),
        ("hardware: [L4]\ndevice: mps\n", "device: 'mps' cannot run hardware L4"),
        ("hardwares: [L4]\n", "hardwares: unknown key"),
    ],
)
def test_bad_values_are_one_line_naming_file_and_path(tmp_path, extra, needle):
    with pytest.raises(SpecError) as e:
        _load(tmp_path, extra)
    msg = str(e.value)
    assert msg.startswith(str(tmp_path / "s.yaml")) and needle in msg and "\n" not in msg, msg


def test_each_config_once_per_type_with_its_device(tmp_path):
    plain_sweep, plain = _load(tmp_path, name="plain")
    sweep, trials = _load(tmp_path, "hardware: [H100, A100, cpu]\n", name="hw")
    assert len(plain) == 3 and len(trials) == 9 == grid_size(sweep) == 3 * grid_size(plain_sweep)
    assert Counter(t.hardware for t in trials) == {"H100": 3, "A100": 3, "cpu": 3}
    assert {t.hardware: t.device for t in trials} == {"H100": "cuda", "A100": "cuda", "cpu": "cpu"}
    assert len({t.config_hash for t in trials}) == 9
    # the same config on each type: only hardware and device differ
    strip = lambda t: {**t.to_dict(), "hardware": None, "device": None}  # noqa: E731
    assert {str(strip(t)) for t in trials} == {str(strip(t)) for t in plain}
    # an explicit device the types accept is kept; a profile trial is made per type too
    _, explicit = _load(tmp_path, "hardware: [L4]\ndevice: cuda:1\nprofile: true\n", name="x")
    assert [(t.method, t.device, t.hardware) for t in explicit][0] == ("profile", "cuda:1", "L4")
    assert len(explicit) == 4


def test_without_hardware_hashes_are_as_before(tmp_path):
    """The golden hash of tests/orchestrator/spec/test_sweep_spec.py, with and without the new
    field at its default: every trial stored before `hardware:` keeps its identity."""
    golden = TrialConfig(
        target="tiny-llama",
        draft="tiny-llama-draft",
        dataset="spec_bench",
        prompts=1,
        method="linear",
        params={"k": 2, "verifier": "greedy"},
        max_new_tokens=8,
    )
    expected = "66d81396c209b5062a42b3eb6f8e06c9a04b1f8d6c44d0af2988e4297afffe68"
    assert golden.config_hash == expected
    stored = {k: v for k, v in golden.to_dict().items() if k != "hardware"}  # an old row
    assert TrialConfig.from_dict(stored).config_hash == expected
    assert TrialConfig.from_dict(stored).hardware is None
    typed = TrialConfig.from_dict({**stored, "hardware": "H100"})
    assert typed.config_hash != expected
    assert golden.pair_key == (
        "tiny-llama",
        "tiny-llama-draft",
        "auto",
        "auto",
        None,
        None,
        None,
        (),
    )
    assert typed.pair_key == (*golden.pair_key, "H100")
    # a sweep without the key: no hardware in its trials or its stored spec
    sweep, trials = _load(tmp_path)
    assert sweep.hardware == () and "hardware" not in sweep.to_dict()
    assert all(t.hardware is None for t in trials)


def test_label_names_the_hardware(tmp_path):
    _, trials = _load(tmp_path, "hardware: [h100]\nprofile: true\n")
    profile, run = trials[0], trials[1]
    assert profile.label().endswith(" on H100") and profile.label().startswith("profile ")
    assert run.label().endswith(" on H100")
    _, plain = _load(tmp_path, name="plain")
    assert " on " not in plain[0].label()


def test_hardware_rules():
    assert canonical("Cpu") == "cpu" and canonical("a10g") == "A10G"
    assert hardware_problem("H100") is None and hardware_problem("auto") is not None
    assert hardware_problem("x" * 65) is not None
    assert gpu_type("NVIDIA H100 80GB HBM3") == "H100"
    assert gpu_type("NVIDIA A100-SXM4-80GB") == "A100"
    assert gpu_type("NVIDIA A10G") == "A10G"
    assert gpu_type("Tesla V100-SXM2-16GB") == "V100"
    assert gpu_type("NVIDIA GeForce RTX 4090") == "GEFORCE-RTX-4090"
    nodes = [
        {"Alive": True, "Resources": {"CPU": 2.0, "GPU": 2.0, "accelerator_type:H100": 1.0}},
        {"Alive": True, "Resources": {"CPU": 1.0, "GPU": 1.0, "accelerator_type:H100": 1.0}},
        {"Alive": True, "Resources": {"CPU": 0.0, "GPU": 4.0, "accelerator_type:A10G": 1.0}},
        {"Alive": False, "Resources": {"CPU": 8.0, "GPU": 8.0, "accelerator_type:L4": 1.0}},
    ]
    assert node_types(nodes) == {"H100": ("H100", 3.0), "A10G": ("A10G", 4.0), "cpu": ("cpu", 3.0)}


def test_canonical_spelling_is_rays():
    """Every NVIDIA type Ray names its GPU nodes with is its own canonical spelling, and the
    device-name rule is Ray's (ray/_private/accelerators/nvidia_gpu.py)."""
    accelerators = pytest.importorskip("ray.util.accelerators")
    nvidia = [v for k, v in vars(accelerators).items() if k.startswith("NVIDIA_")]
    assert "H100" in nvidia and "A10G" in nvidia
    for name in nvidia:
        assert canonical(name.lower()) == name and hardware_problem(name) is None, name
    from ray._private.accelerators.nvidia_gpu import NvidiaGPUAcceleratorManager as M

    for device in ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB", "NVIDIA L4", "NVIDIA H200"):
        assert gpu_type(device) == canonical(M._gpu_name_to_accelerator_type(device)), device
