"""Which pipeline a measurement runs on, and the one bounded cache that loads each pipeline once.

Order of use:

    spec = PipelineSpec("speculative", draft_variant="int8", draft_precision="bf16")
    pool = PipelinePool(get_pair("offline"), "CPU")   # loads nothing yet
    loaded = pool.get(spec)                           # built on first use, kept for the next call
    reference = pool.get(spec.plain_reference)        # the plain pipeline it is compared with
    pool.evictions                                    # one sentence per pipeline freed to make room
    pool.release()                                    # free the compiled models

`PipelineSpec` names a pipeline (mode, draft variant, precisions, scheduler
settings); `load_spec_pipeline` builds it with `utils.decoding.pipelines.load_pipeline`
(the one pipeline builder) and `request_token_probabilities`, so every
pipeline of a sweep computes token probabilities.

`BoundedPipelines` is the one implementation of load-on-first-use with a bound:
any key with a `mode` and a `label` (a `PipelineSpec`, the playground's
`utils.display.playground_choice.PlaygroundPipeline`), a load function, at most `keep`
pipelines in memory; to make room it frees the least recently used pipeline
that is not plain (plain references are kept first) and says so in
`evictions`. `PipelinePool` is `BoundedPipelines` over one pair and device,
keyed by `PipelineSpec`; used by `utils.tuning.sweeps`, `utils.tuning.concurrency`,
`utils.tuning.pipeline_memory`, `utils.tuning.autotune` and `utils.tuning.task_tuner`. The
playground's `PipelineCache` is `BoundedPipelines` with a warm-up.

Heavy imports (openvino_genai) happen inside `utils.decoding.pipelines`' functions.
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

    mode: "plain", "speculative" or "prompt_lookup".
    draft_variant: name of one of the pair's drafts (`ModelPair.draft_variant`), None = its default draft.
    main_precision / draft_precision: inference precision of each model ("f32", "bf16", "f16",
        "default"); draft_precision None = same as the main. Only the main model's precision
        decides the output: a lower-precision draft only changes how often it is accepted.
    cache_size_gb: the scheduler's KV-cache size, 0 = grow with demand.
    max_num_batched_tokens: the scheduler's token budget per step, None = OpenVINO GenAI's default.
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

    Measured with OpenVINO GenAI 2026.4: under greedy decoding with the default
    logprobs=0 the sampler does not compute the draft's token probabilities,
    so `assistant_confidence_threshold` has no effect and the draft proposes
    exactly one token per step for any threshold (the run equals K=1). With
    logprobs >= 1 the threshold works. Every pipeline of a sweep gets the same
    setting, so plain and speculative runs pay the same (small) cost.
    """
    config = loaded.pipeline.get_generation_config()
    config.logprobs = max(int(config.logprobs), 1)
    eos = loaded.pipeline.get_tokenizer().get_eos_token_id()
    if eos >= 0:
        config.set_eos_token_id(eos)  # set_generation_config rejects the unset (-1) end-of-sequence id
    loaded.pipeline.set_generation_config(config)
    return loaded


def load_spec_pipeline(pair: ModelPair, spec: PipelineSpec, device: str = "CPU") -> LoadedPipeline:
    """Build the pipeline `spec` describes (`utils.decoding.pipelines.load_pipeline`), with token probabilities on."""
    draft = spec.draft_spec(pair)
    return request_token_probabilities(load_pipeline(
        spec.mode, pair.main.path, device, draft_dir=draft.path if draft else None,
        precision=spec.main_precision, cache_size_gb=spec.cache_size_gb,
        max_num_batched_tokens=spec.max_num_batched_tokens, draft_precision=spec.draft_precision))


class PipelineKey(Hashable, Protocol):
    """What `BoundedPipelines` needs of a key: the pipeline's mode (plain ones are kept first) and a label."""

    @property
    def mode(self) -> str: ...

    @property
    def label(self) -> str: ...


Key = TypeVar("Key", bound=PipelineKey)


class BoundedPipelines(Generic[Key]):
    """Pipelines loaded on first use (`load(key)`), at most `keep` in memory, each eviction said in `evictions`.

    To make room it frees the least recently used pipeline that is not plain, or
    the least recently used one when all are plain. `loads` counts the loads.
    """

    def __init__(self, load: Callable[[Key], LoadedPipeline], keep: int = DEFAULT_KEEP,
                 on_evict: Callable[[str], None] | None = None) -> None:
        self.load = load
        self.keep = as_integer(keep, "keep", minimum=1, advice="Keep at least one pipeline in memory.")
        self.on_evict = on_evict
        self.loads = 0
        self.evictions: list[str] = []  # "Freed the ... pipeline to make room for ...", oldest first
        self._loaded: dict[Key, LoadedPipeline] = {}  # least recently used first

    def __contains__(self, key: Key) -> bool:
        return key in self._loaded

    def __len__(self) -> int:
        return len(self._loaded)

    def keys(self) -> list[Key]:
        """The keys in memory, least recently used first."""
        return list(self._loaded)

    def get(self, key: Key) -> LoadedPipeline:
        """The pipeline for `key`: the one in memory, else loaded (after freeing others to stay within `keep`)."""
        if key in self._loaded:
            self._loaded[key] = self._loaded.pop(key)  # now the most recently used
            return self._loaded[key]
        while len(self._loaded) >= self.keep:
            evict = next((k for k in self._loaded if k.mode != "plain"), next(iter(self._loaded)))
            del self._loaded[evict]
            message = (f"Freed the {evict.label} pipeline to make room for the {key.label} pipeline "
                       f"(at most {self.keep} kept in memory).")
            self.evictions.append(message)
            if self.on_evict is not None:
                self.on_evict(message)
        self._loaded[key] = self.load(key)
        self.loads += 1
        return self._loaded[key]

    def release(self) -> None:
        """Free every pipeline (the counters stay)."""
        self._loaded.clear()


class PipelinePool:
    """Pipelines of one pair on one device, keyed by `PipelineSpec`, loaded on first use, at most `keep` kept.

    A sweep over draft variants would otherwise hold one compiled copy of the
    main model per variant in memory. The bound and eviction are `BoundedPipelines`'.
    """

    def __init__(self, pair: ModelPair, device: str = "CPU", keep: int = DEFAULT_KEEP) -> None:
        self.pair = pair
        self.device = device
        self.pipelines: BoundedPipelines[PipelineSpec] = BoundedPipelines(self._load, keep)

    @property
    def keep(self) -> int:
        return self.pipelines.keep

    @keep.setter
    def keep(self, keep: int) -> None:
        self.pipelines.keep = as_integer(keep, "keep", minimum=1)

    @property
    def evictions(self) -> list[str]:
        """One sentence per pipeline freed to make room, oldest first."""
        return self.pipelines.evictions

    def canonical(self, spec: PipelineSpec) -> PipelineSpec:
        """The same pipeline spelled one way: the pair's default draft as None, a draft precision equal to the main's as None."""
        if spec.mode != "speculative":
            return spec
        variant = spec.draft_variant
        if variant is not None and self.pair.draft_variant(variant) == self.pair.draft:
            variant = None
        precision = None if spec.draft_precision == spec.main_precision else spec.draft_precision
        return replace(spec, draft_variant=variant, draft_precision=precision)

    def get(self, spec: PipelineSpec) -> LoadedPipeline:
        return self.pipelines.get(self.canonical(spec))

    def release(self) -> None:
        self.pipelines.release()

    def _load(self, spec: PipelineSpec) -> LoadedPipeline:
        return load_spec_pipeline(self.pair, spec, self.device)
