"""Which pipeline a measurement runs on (`PipelineSpec`), and the bounded cache that loads each pipeline once.

`BoundedPipelines` keeps at most `keep` pipelines, evicting the least recently used non-plain one first;
`PipelinePool` (one pair and device) and the playground's `PipelineCache` build on it.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace
from typing import Generic, Protocol, TypeVar

from utils.decoding.pipelines import LoadedPipeline, SpeculationSetupError, device_properties, load_pipeline
from utils.input_checks import as_integer
from utils.models.model_catalogue import ModelPair, ModelSpec

DEFAULT_KEEP = 2  # pipelines kept in memory: a plain reference and the one it is compared with


@dataclass(frozen=True)
class PipelineSpec:
    """Which pipeline a measurement (sweep point, batch, memory probe) runs on.

    Only the main model's precision decides the output; a lower-precision draft only changes acceptance.
    cache_size_gb 0 = grow with demand; None fields = the default (draft precision: the main's).
    """

    mode: str = "speculative"
    draft_variant: str | None = None
    main_precision: str = "f32"
    draft_precision: str | None = None
    cache_size_gb: int = 0
    max_num_batched_tokens: int | None = None

    def __post_init__(self) -> None:
        device_properties(self.main_precision)
        device_properties(self.draft_precision)
        if self.mode != "speculative" and (self.draft_variant is not None or self.draft_precision is not None):
            raise SpeculationSetupError(f"A {self.mode} pipeline has no draft: leave draft_variant/draft_precision None.")

    @property
    def plain_reference(self) -> PipelineSpec:
        """The plain pipeline this one is compared with: same main precision, same scheduler cache."""
        return PipelineSpec("plain", main_precision=self.main_precision, cache_size_gb=self.cache_size_gb,
                            max_num_batched_tokens=self.max_num_batched_tokens)

    def draft_spec(self, pair: ModelPair) -> ModelSpec | None:
        return pair.draft_variant(self.draft_variant) if self.mode == "speculative" else None

    @property
    def label(self) -> str:
        if self.mode != "speculative":
            return f"{self.mode} (main {self.main_precision})"
        draft = f"{self.draft_variant} draft" if self.draft_variant else "default draft"
        return f"{draft} @ {self.draft_precision or self.main_precision}, main @ {self.main_precision}"


def request_token_probabilities(loaded: LoadedPipeline) -> LoadedPipeline:
    """Make the pipeline's default generation config compute token probabilities (logprobs=1).

    GenAI 2026.4, greedy: with logprobs=0 the draft's probabilities are not computed, so
    `assistant_confidence_threshold` has no effect (any threshold runs as K=1). Plain pipelines get it too (same cost).
    """
    config = loaded.pipeline.get_generation_config()
    config.logprobs = max(int(config.logprobs), 1)
    eos = loaded.pipeline.get_tokenizer().get_eos_token_id()
    if eos >= 0:
        config.set_eos_token_id(eos)  # set_generation_config rejects the unset (-1) end-of-sequence id
    loaded.pipeline.set_generation_config(config)
    return loaded


def load_spec_pipeline(pair: ModelPair, spec: PipelineSpec, device: str = "CPU") -> LoadedPipeline:
    """Build the pipeline `spec` describes, with token probabilities on."""
    draft = spec.draft_spec(pair)
    return request_token_probabilities(load_pipeline(
        spec.mode, pair.main.path, device, draft_dir=draft.path if draft else None,
        precision=spec.main_precision, cache_size_gb=spec.cache_size_gb,
        max_num_batched_tokens=spec.max_num_batched_tokens, draft_precision=spec.draft_precision))


class PipelineKey(Hashable, Protocol):
    """What `BoundedPipelines` needs of a key: a mode (plain ones are kept first) and a label."""

    @property
    def mode(self) -> str: ...

    @property
    def label(self) -> str: ...


Key = TypeVar("Key", bound=PipelineKey)


class BoundedPipelines(Generic[Key]):
    """Pipelines loaded on first use, at most `keep` in memory (least recently used non-plain evicted first)."""

    def __init__(self, load: Callable[[Key], LoadedPipeline], keep: int = DEFAULT_KEEP) -> None:
        self.load = load
        self.keep = as_integer(keep, "keep", minimum=1, advice="Keep at least one pipeline in memory.")
        self.evictions: list[str] = []  # "Freed the ... pipeline to make room for ...", oldest first
        self._loaded: dict[Key, LoadedPipeline] = {}  # least recently used first

    def get(self, key: Key) -> LoadedPipeline:
        """The pipeline for `key`, loaded (after freeing others to stay within `keep`) if not in memory."""
        if key in self._loaded:
            self._loaded[key] = self._loaded.pop(key)  # now the most recently used
            return self._loaded[key]
        while len(self._loaded) >= self.keep:
            evict = next((k for k in self._loaded if k.mode != "plain"), next(iter(self._loaded)))
            del self._loaded[evict]
            self.evictions.append(f"Freed the {evict.label} pipeline to make room for the {key.label} pipeline "
                                  f"(at most {self.keep} kept in memory).")
        self._loaded[key] = self.load(key)
        return self._loaded[key]

    def release(self) -> None:
        """Free every pipeline."""
        self._loaded.clear()


class PipelinePool(BoundedPipelines[PipelineSpec]):
    """Pipelines of one pair and device by `PipelineSpec`, bounded so a draft sweep keeps no main model per variant."""

    def __init__(self, pair: ModelPair, device: str = "CPU", keep: int = DEFAULT_KEEP) -> None:
        super().__init__(lambda spec: load_spec_pipeline(pair, spec, device), keep)
        self.pair = pair

    def canonical(self, spec: PipelineSpec) -> PipelineSpec:
        """The same spec spelled one way: default draft and a draft precision equal to the main's as None."""
        if spec.mode != "speculative":
            return spec
        variant = spec.draft_variant
        if variant is not None and self.pair.draft_variant(variant) == self.pair.draft:
            variant = None
        precision = None if spec.draft_precision == spec.main_precision else spec.draft_precision
        return replace(spec, draft_variant=variant, draft_precision=precision)

    def get(self, spec: PipelineSpec) -> LoadedPipeline:
        return super().get(self.canonical(spec))
