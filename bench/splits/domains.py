"""Domain-shifted streams of the mixed setting (`setting.domains`): the domain each stage draws its images from.

A domain is one of:

- `clean`: the dataset's images as they are;
- `<corruption>:<severity>`: the images through one of the ImageNet-C family's corruption functions (Hendrycks and
  Dietterich, ICLR'19; the `imagecorruptions` package's names, `CORRUPTIONS`) at severity 1-5, applied once per image
  and cached (`bench.data.domains`);
- a domain the dataset itself holds (DomainNet's `real`, `sketch`, ...: its reader's `extra["domains"]`).

A stream names one domain per stage, the labelled stage 0 first. `setting.domains` holds the list, or the name of
a stream of `STREAMS` (bench's own streams: the papers that run such streams, PRISM and "Beyond the Static World",
could not be read here, so none is registered under a paper's name; docs/settings.md#domain-shifted-streams).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from bench.errors import BenchError, closest, suggestion

# the `imagecorruptions` package's 19 functions: ImageNet-C's 15 test corruptions, then its 4 validation ones
CORRUPTIONS = ("gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "glass_blur", "motion_blur",
               "zoom_blur", "snow", "frost", "fog", "brightness", "contrast", "elastic_transform", "pixelate",
               "jpeg_compression", "speckle_noise", "gaussian_blur", "spatter", "saturate")
SEVERITIES = (1, 2, 3, 4, 5)
CLEAN = "clean"
DATASET_DOMAINS = {"domainnet": ("clipart", "infograph", "painting", "quickdraw", "real", "sketch")}

# bench's streams (not a paper's): one corruption of each ImageNet-C family (noise, blur, weather, digital, and a
# second digital one) at the middle severity after a clean labelled stage; DomainNet's six domains, the photographs
# labelled, then the others from the most to the least photographic (a choice: no paper's order could be read here)
STREAMS: dict[str, tuple[str, ...]] = {
    "imagenet-c-6": ("clean", "gaussian_noise:3", "motion_blur:3", "snow:3", "contrast:3", "jpeg_compression:3"),
    "domainnet-6": ("real", "painting", "clipart", "sketch", "infograph", "quickdraw"),
}


@dataclass(frozen=True)
class Domain:
    """One stage's domain (module docstring): `kind` is `clean`, `corruption` or `dataset`."""

    name: str
    severity: int = 0

    @property
    def kind(self) -> str:
        if self.name == CLEAN:
            return "clean"
        return "corruption" if self.name in CORRUPTIONS else "dataset"

    def __str__(self) -> str:
        return f"{self.name}:{self.severity}" if self.kind == "corruption" else self.name


def parse_domain(text: Any, dataset: str = "") -> Domain:
    """A `Domain` from its name, or a `BenchError` that lists the valid ones."""
    if not isinstance(text, str) or not text.strip():
        raise BenchError(f"bad domain {text!r}: a name, e.g. clean, fog:3 or sketch")
    name, _, severity = text.strip().partition(":")
    held = DATASET_DOMAINS.get(dataset, ())
    if name in CORRUPTIONS:
        if severity not in {str(s) for s in SEVERITIES}:
            raise BenchError(f"bad domain {text!r}: a corruption takes a severity 1-5 after a colon, e.g. {name}:3")
        return Domain(name, int(severity))
    if severity and (name == CLEAN or name in held):
        raise BenchError(f"bad domain {text!r}: only a corruption takes a severity; corruptions: "
                         f"{', '.join(CORRUPTIONS)}")
    if name == CLEAN or name in held:
        return Domain(name)
    valid = (CLEAN, *CORRUPTIONS, *held)
    where = f"; {dataset} holds the domains {', '.join(held)}" if held else ""
    raise BenchError(f"unknown domain {name!r}: valid: clean, <corruption>:<severity 1-5> with a corruption of "
                     f"{', '.join(CORRUPTIONS)}{where}{suggestion(closest(name, valid))}")


def stream_of(value: Any, n_steps: int, dataset: str = "") -> tuple[Domain, ...] | None:
    """The stages' domains `setting.domains` names (a list, or a name of `STREAMS`), None for no shift; a `BenchError`
    where the list is not one valid domain per stage, or mixes a dataset's domains with corruptions."""
    if value in (None, "", [], ()):
        return None
    if isinstance(value, str):
        if value not in STREAMS:
            listed = "," in value or value.startswith("[")
            raise BenchError(f"unknown stream setting.domains={value!r}: give a list of one domain per stage (on the "
                             f"command line its names quoted: \"setting.domains=['clean','fog:3',...]\"), or one of "
                             f"{', '.join(STREAMS)}" + ("" if listed else suggestion(closest(value, STREAMS))))
        value = STREAMS[value]
    if not isinstance(value, (list, tuple)):
        raise BenchError(f"bad setting.domains={value!r}: a list of one domain per stage, or a stream's name")
    if len(value) != n_steps:
        raise BenchError(f"setting.domains names {len(value)} domain(s); the protocol has {n_steps} stages "
                         f"(the labelled stage 0 first): name one per stage")
    stream = tuple(parse_domain(v, dataset) for v in value)
    kinds = {d.kind for d in stream}
    if "dataset" in kinds and kinds != {"dataset"}:
        raise BenchError(f"setting.domains={list(map(str, stream))}: a stream takes either the dataset's own domains "
                         f"or clean images and corruptions, not both")
    return stream


def distinct(stream: Sequence[Domain]) -> list[Domain]:
    """The stream's domains, each once, in the order the stages first bring them."""
    out: list[Domain] = []
    for domain in stream:
        if domain not in out:
            out.append(domain)
    return out


def label(value: Any) -> str:
    """How results name a stream: its registered name, or its domains joined by `>`."""
    if isinstance(value, str):
        return value
    return ">".join(str(v) for v in value)
