"""nvidia-smi's CSV with blank and unsupported cells, a fake nvidia-smi that checks its exact
arguments, one that hangs, prints nothing or fails silently, and open_gpu_source's choices and
messages."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.gpu_fakes import FORMAT, H100_ROW, QUERY, fake_pynvml, scripted_smi

from spark_otel import ConfigError, NoGpuError
from spark_otel.receivers.gpu import GpuReading, SmiSource, open_gpu_source, parse_smi_csv

HINT = "use --source sim --sim-url URL to read a simulated box instead"
GB10_ROW = "1, NVIDIA GB10, GPU-aaaa, [N/A], 37.10, 2418, [N/A], [N/A], [N/A]"


def _figures(r: GpuReading) -> tuple[object, ...]:
    return (
        r.gpu_id,
        r.name,
        r.unix_ns,
        r.utilization,
        r.power_w,
        r.energy_j,
        r.sm_clock_mhz,
        r.memory_clock_mhz,
        r.memory_used_bytes,
        r.memory_total_bytes,
    )


H100 = ("0", "NVIDIA H100 80GB HBM3", 7, 0.96, 312.45, None, 1980.0, 2619.0, 40536 * 2**20, 81559 * 2**20)
GB10 = ("1", "NVIDIA GB10", 7, None, 37.1, None, 2418.0, None, None, None)


def test_rows_with_nothing_in_them_are_skipped_wherever_they_are() -> None:
    """An empty line, a line of spaces and a row of empty cells, before and between the GPUs,
    are no GPU; every figure of both rows reads (MiB to bytes, percent to fraction, [N/A] None)."""
    text = f"\n{H100_ROW}\n   \n , , , , , , , , \n\n{GB10_ROW}\n"
    h100, gb10 = parse_smi_csv(text, unix_ns=7)
    assert _figures(h100) == H100
    assert _figures(gb10) == GB10


def test_a_row_of_the_wrong_shape_is_quoted_whole() -> None:
    with pytest.raises(NoGpuError) as info:
        parse_smi_csv("0, x, y\n", unix_ns=1)
    assert str(info.value) == "nvidia-smi line 1: expected 9 fields, got 3: '0, x, y'"


def test_smi_source_runs_nvidia_smi_with_its_exact_arguments(tmp_path: Path) -> None:
    """The fake refuses anything but the documented query and format."""
    exe = scripted_smi(tmp_path, f"echo '{H100_ROW}'")
    [reading] = SmiSource(str(exe)).read()
    assert _figures(reading)[3:] == H100[3:]


def test_nvidia_smi_listing_nothing_is_no_gpu(tmp_path: Path) -> None:
    with pytest.raises(NoGpuError) as info:
        SmiSource(str(scripted_smi(tmp_path, "exit 0")))
    assert str(info.value) == "nvidia-smi lists no GPU"


def test_nvidia_smi_failing_without_a_word_says_no_message(tmp_path: Path) -> None:
    with pytest.raises(NoGpuError) as info:
        SmiSource(str(scripted_smi(tmp_path, "exit 3")))
    assert str(info.value) == "nvidia-smi exited 3: no message"


def test_a_hung_nvidia_smi_is_cut_off_at_the_timeout(tmp_path: Path) -> None:
    """A wedged driver can hang nvidia-smi; the read gives up after ``timeout_s`` (here 0.3 s,
    against a 3 s hang) with the reason, instead of hanging the sampler."""
    exe = str(scripted_smi(tmp_path, "exec sleep 3"))
    with pytest.raises(NoGpuError) as info:
        SmiSource(exe, timeout_s=0.3)
    expected = subprocess.TimeoutExpired([exe, QUERY, FORMAT], 0.3)
    assert str(info.value) == f"nvidia-smi did not run: {expected}"


def test_an_nvidia_smi_that_cannot_start_gives_the_reason(tmp_path: Path) -> None:
    missing = str(tmp_path / "nvidia-smi")
    with pytest.raises(NoGpuError) as info:
        SmiSource(missing)
    assert str(info.value) == f"nvidia-smi did not run: [Errno 2] No such file or directory: {missing!r}"


def test_no_nvidia_smi_on_path_says_exactly_that(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(NoGpuError) as info:
        SmiSource()
    assert str(info.value) == "nvidia-smi is not on PATH"


def test_open_gpu_source_by_default_tries_nvml_then_nvidia_smi(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No argument means auto: both reasons, then the hint."""
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(NoGpuError) as info:
        open_gpu_source()
    assert str(info.value) == (
        "no NVIDIA GPU found: NVML is not available: nvidia-ml-py is not installed; "
        f"nvidia-smi is not on PATH; {HINT}"
    )


def test_smi_asked_for_is_smi_even_where_nvml_works(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    monkeypatch.setenv("PATH", str(scripted_smi(tmp_path, f"echo '{H100_ROW}'").parent))
    source = open_gpu_source("smi")
    assert source.kind == "smi"
    [reading] = source.read()
    assert reading.name == "NVIDIA H100 80GB HBM3"


def test_smi_asked_for_and_missing_names_nvidia_smi(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(NoGpuError) as info:
        open_gpu_source("smi")
    assert str(info.value) == f"no NVIDIA GPU found: nvidia-smi is not on PATH; {HINT}"


def test_nvml_asked_for_and_failing_gives_its_reason_and_the_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(init_fails=True))
    with pytest.raises(NoGpuError) as info:
        open_gpu_source("nvml")
    assert str(info.value) == (
        f"no NVIDIA GPU found: NVML cannot start (Driver Not Loaded); no NVIDIA driver or GPU here; {HINT}"
    )


def test_sim_without_a_url_and_with_a_bad_one_name_the_option() -> None:
    with pytest.raises(ConfigError) as info:
        open_gpu_source("sim")
    assert str(info.value) == (
        "the simulated GPU source (sim) needs --sim-url URL (a simulated engine's base URL)"
    )
    with pytest.raises(ConfigError) as info:
        open_gpu_source("sim", sim_url="ftp://box")
    assert str(info.value) == (
        "--sim-url 'ftp://box': not an http:// or https:// URL with a host; expected e.g. http://127.0.0.1:8011"
    )


def test_an_unknown_source_lists_the_ones_there_are() -> None:
    with pytest.raises(ConfigError) as info:
        open_gpu_source("cuda")  # type: ignore[arg-type]
    assert str(info.value) == "unknown GPU source 'cuda': use auto, nvml, smi or sim"
