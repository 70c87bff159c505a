"""The small wheels that stock vLLM 0.26.0 needs on the lent H200 beyond what its image holds.

Run here, where PyPI can be reached, by `bash scripts/vllm_gpu.sh prepare`:
  python3 scripts/vllm_wheels.py resolve VLLM_WHEEL DIR  # download the Requires-Dist closure into DIR
  python3 scripts/vllm_wheels.py check VLLM_WHEEL DIR    # install both into a --target, walk its needs
The target is CPython 3.12.3 on x86_64 Linux, the image of /work/.library/device/KINDS.md ("Python
packages already there"); its README allows manylinux_2_N wheels up to N = 39 (llguidance 1.7 has
only manylinux_2_31 ones). Each carried package is the newest release uploaded by UPLOADED_BY
that meets every requirement on it, so a re-run gives the same set; exactly one version of each.
"""
import hashlib
import importlib.metadata as md
import json
import subprocess
import sys
import tempfile
import urllib.request
import zipfile
from email.parser import Parser
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import compatible_tags, cpython_tags
from packaging.utils import canonicalize_name as canon
from packaging.utils import parse_wheel_filename
from packaging.version import Version

UPLOADED_BY = "2026-12-02"  # UTC; wheels1 was rebuilt early that day, a day after the measured install
ENV = {"python_version": "3.12", "python_full_version": "3.12.3", "implementation_name": "cpython",
       "platform_python_implementation": "CPython", "platform_machine": "x86_64",
       "platform_system": "Linux", "sys_platform": "linux", "os_name": "posix"}
# Best first: manylinux_2_28 and older, as vLLM's own wheel; then newer ones up to 2_39.
PLATFORMS = [f"manylinux_2_{m}_x86_64" for m in [*range(28, 4, -1), *range(29, 40)]] + [
    "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]
TAGS = {str(t): i for i, t in enumerate([*cpython_tags((3, 12), ["cp312"], PLATFORMS),
                                         *compatible_tags((3, 12), "cp312", PLATFORMS)])}

# The image: KINDS.md's package list, and the versions its pip-list row gives. For the others, the image
# (read 2026-11-17) is taken to hold a version that meets what PyPI's newest release meets.
IMAGE = set("""
absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build
certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings
cuda-core cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils
execnet filelock flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet
httpcore httpx huggingface-hub humanize hypothesis idna imageio iniconfig interface-meta jax
jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning
lightning-utilities linear-operator lineax llvmlite lxml markdown markdown-it-py markupsafe matplotlib
mdurl meson ml-dtypes mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind
narwhals networkx ninja numba numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti
nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand
nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink
nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript opencv-python-headless optax
opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging pandas pathspec patsy peft pillow pip
pluggy portalocker prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments
pyparsing pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock
pytest-timeout pytest-xdist python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu
safetensors scikit-build-core scikit-image scikit-learn scipy seaborn sentencepiece
sentence-transformers setuptools shellingham simplejson six sortedcontainers statsmodels sympy
tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm
tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm
transformers treescope triton typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig
werkzeug wheel wrapt xarray xxhash yarl zipp""".split())
IMAGE_VERSIONS = {
    "accelerate": "1.15.0", "botorch": "0.18.1", "cupy-cuda13x": "14.2.0", "gpytorch": "1.15.2",
    "huggingface-hub": "1.33.0", "jax": "0.11.2", "jax-cuda13-pjrt": "0.11.2",
    "jax-cuda13-plugin": "0.11.2", "jaxlib": "0.11.2", "jaxtyping": "0.3.11", "numpy": "2.5.2",
    "numpyro": "0.21.0", "onnx": "1.23.1", "onnx-ir": "1.0.0", "onnxruntime": "1.30.0",
    "onnxscript": "0.7.2", "pytorch-lightning": "2.6.6", "safetensors": "0.8.0",
    "sentence-transformers": "6.0.1", "sentencepiece": "0.2.2", "tiktoken": "0.14.0",
    "tokenizers": "0.23.2", "torch": "2.11.0+cu130", "torch-geometric": "2.8.0.post1",
    "torchaudio": "2.11.0", "torchdiffeq": "0.2.5", "torchmetrics": "1.9.0", "torchvision": "0.26.0",
    "transformers": "5.17.0", "triton": "3.6.0"}
# vLLM's CUDA-kernel extras, not carried (as in the measured install); vllm_gpu.sh check reads this too.
LEFT_OUT = {"flashinfer-python", "tilelang", "quack-kernels", "tokenspeed-mla", "humming-kernels",
            "pynvvideocodec", "torchcodec", "fastsafetensors", "nvidia-cutlass-dsl", "nvidia-cudnn-frontend"}
# shared/VLLM_NOTES.md, GPU: openai 3.x imports httpx2; xgrammar 0.2.9 fails on apache-tvm-ffi < 0.1.15
# (its lark ==1.2.2, compressed-tensors ==0.17.0 and fastapi <0.137 are vLLM's own requirements).
PINS = {"openai": "<3", "anthropic": "<1", "apache-tvm-ffi": ">=0.1.15"}
# Requirements not met on purpose: (who asks, of what) -> why.
WAIVED = {("vllm", "apache-tvm-ffi"): "its ==0.1.10 breaks xgrammar (PINS)",
          ("vllm", "numba"): "numba 0.65.0 refuses numpy > 2.4 (the image's is 2.5.2): the image's numba stays",
          ("mistral-common", "numpy"): "<2.4 on Python 3.12; torch and the image use numpy 2.5.2"}


def requires(lines, extras) -> list[Requirement]:
    """The Requires-Dist lines that apply on the target when these extras are asked for."""
    reqs = [Requirement(line) for line in lines or []]
    return [r for r in reqs if r.marker is None
            or any(r.marker.evaluate({**ENV, "extra": e}) for e in ["", *extras])]


def releases(name: str) -> dict[Version, dict]:
    """PyPI's best wheel for the target of each version of name (index JSON file entries)."""
    url = f"https://pypi.org/simple/{name}/"
    with urllib.request.urlopen(urllib.request.Request(
            url, headers={"Accept": "application/vnd.pypi.simple.v1+json"})) as r:
        files = json.load(r)["files"]
    best = {}
    for f in files:
        if (not f["filename"].endswith(".whl") or f.get("yanked") or f["upload-time"] > UPLOADED_BY
                or not python_ok(f.get("requires-python"))):
            continue
        _, version, _, tags = parse_wheel_filename(f["filename"])
        rank = min((TAGS[str(t)] for t in tags if str(t) in TAGS), default=None)
        if rank is not None and (version not in best or rank < best[version][0]):
            best[version] = (rank, f)
    return {v: f for v, (_, f) in best.items()}


def python_ok(requires_python) -> bool:
    try:
        return not requires_python or SpecifierSet(requires_python).contains(ENV["python_full_version"])
    except InvalidSpecifier:  # a few old releases carry malformed ones
        return False


def fetch(f: dict, out: Path) -> Path:
    path = out / f["filename"]
    if not path.exists() or hashlib.sha256(path.read_bytes()).hexdigest() != f["hashes"]["sha256"]:
        with urllib.request.urlopen(f["url"]) as r:
            data = r.read()
        assert hashlib.sha256(data).hexdigest() == f["hashes"]["sha256"], f["filename"]
        path.write_bytes(data)
    return path


def requires_dist(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        text = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    return Parser().parsestr(text).get_all("Requires-Dist") or []


def demands(meta: dict[str, list[str]]) -> dict[str, list[tuple[str, Requirement]]]:
    """Who asks what of each package, walking from vllm through the carried packages (meta)."""
    asked, todo, seen = {}, [("vllm", frozenset())], set()
    while todo:
        name, extras = todo.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        for r in requires(meta[name], extras):
            asked.setdefault(canon(r.name), []).append((name, r))
            if canon(r.name) in meta:
                todo.append((canon(r.name), frozenset(r.extras)))
    return asked


def resolve(vllm_wheel: Path, out: Path):
    out.mkdir(parents=True, exist_ok=True)
    index, chosen, meta = {}, {}, {"vllm": requires_dist(vllm_wheel)}
    for _ in range(20):  # choose, read the chosen wheels' requirements, until the choice holds
        choice = {}
        for name, asks in sorted(demands(meta).items()):
            spec = SpecifierSet(PINS.get(name, ""))
            for who, r in asks:
                spec &= SpecifierSet() if (who, name) in WAIVED else r.specifier
            if name in LEFT_OUT:
                continue
            if name in IMAGE_VERSIONS:
                assert spec.contains(IMAGE_VERSIONS[name], prereleases=True), f"image's {name}: {asks}"
                continue
            index.setdefault(name, releases(name))
            if name in IMAGE and spec.contains(max(SpecifierSet().filter(index[name]))):
                continue  # the image's copy, taken to meet what the newest release meets
            assert not name.startswith("nvidia-"), f"{name}: CUDA wheels come with the image ({asks})"
            fits = list(spec.filter(index[name]))  # final releases unless only pre-releases fit
            assert fits, f"no wheel of {name} meets {spec} ({asks})"
            choice[name] = max(fits)
        if choice == chosen:
            break
        chosen = choice
        meta = {"vllm": meta["vllm"]} | {
            n: requires_dist(fetch(index[n][v], out)) for n, v in chosen.items()}
    else:
        raise RuntimeError("the choice of wheels does not settle")
    keep = {index[n][v]["filename"] for n, v in chosen.items()}
    for stale in out.glob("*.whl"):
        if stale.name not in keep:
            stale.unlink()
    for n, v in sorted(chosen.items()):
        print(f"{n}=={v}")
    print(f"{len(keep)} wheels, {sum((out / k).stat().st_size for k in keep) / 2**20:.1f} MiB in {out}")


def check(vllm_wheel: Path, out: Path):
    """Install vllm and the wheels of out into a --target as on the H200, then every requirement
    reachable from vllm must be met there or by the image, be waived, or be left out on purpose."""
    with tempfile.TemporaryDirectory(prefix="vllm-check-") as site:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                        "--no-compile", "--root-user-action=ignore", "--only-binary=:all:",
                        "--python-version", "3.12", "--implementation", "cp", "--abi", "cp312",
                        *(a for p in PLATFORMS for a in ("--platform", p)), "--target", site,
                        vllm_wheel, *sorted(out.glob("*.whl"))], check=True)
        dists = {canon(d.metadata["Name"]): d for d in md.distributions(path=[site])}
        asked = demands({n: d.requires for n, d in dists.items()})
        versions = {n: d.version for n, d in dists.items()}  # read before the folder goes
    found = {k: set() for k in ("left out on purpose", "waived (WAIVED)", "UNMET",
                                "capped or pinned, taken as met by the image (version unknown here)")}
    unknown = 0
    for m, asks in asked.items():
        have = versions.get(m) or IMAGE_VERSIONS.get(m, "image" if m in IMAGE else None)
        for who, r in asks:
            if (who, m) in WAIVED:
                kind = "waived (WAIVED)"
            elif have is None:
                kind = "left out on purpose" if m in LEFT_OUT else "UNMET"
            elif have != "image":
                kind = None if r.specifier.contains(have, prereleases=True) else "UNMET"
            elif r.extras or any(s.operator in ("==", "===", "~=", "<", "<=") for s in r.specifier):
                kind = "capped or pinned, taken as met by the image (version unknown here)"
            else:
                kind, unknown = None, unknown + 1
            if kind:
                found[kind].add(f"{who} needs {r} -> {have or 'absent'}")
    print(f"check: {len(versions)} distributions; {unknown} more requirements (lower bounds alone)"
          " taken as met by the image's packages of unknown version")
    for kind, lines in found.items():
        print(f"{kind}:", *sorted(lines) or ["none"], sep="\n  ")
    unneeded = sorted(set(versions) - set(asked) - {"vllm"})
    print("shadowing the image's copy:", ", ".join(sorted(set(versions) & IMAGE)) or "none")
    print("carried but not needed:", ", ".join(unneeded) or "none")
    sys.exit(1 if found["UNMET"] or unneeded else 0)


if __name__ == "__main__":
    {"resolve": resolve, "check": check}[sys.argv[1]](Path(sys.argv[2]), Path(sys.argv[3]))
