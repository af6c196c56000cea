"""`orch generate`: one generation with one method, printed (text and stats, or JSON)."""

from __future__ import annotations

import json

import click

from engine.config import ENGINE_SPECS, ConfigError, parse_key_values
from engine.model_names import DEFAULT_PAIR, canonical_name
from orchestrator.cli.options import Finite
from orchestrator.run import check_checkpoints


def _parse_prompt_ids(text: str) -> list[int]:
    try:
        ids = [int(t) for t in text.replace(" ", "").split(",") if t]
    except ValueError:
        raise ConfigError(f"--prompt-ids expects comma-separated integers, got {text!r}") from None
    if not ids:
        raise ConfigError("--prompt-ids is empty")
    return ids


@click.command()
@click.option(
    "--target",
    default=DEFAULT_PAIR[0],
    show_default=True,
    help="target model: a built-in name, a Hugging Face id, a synthetic:ARCH name, or a folder",
)
@click.option(
    "--draft",
    default=DEFAULT_PAIR[1],
    show_default=True,
    help="draft model name or folder; 'none' for model-free methods (lookup, lookup_tree)",
)
@click.option(
    "--target-revision",
    default=None,
    help="a Hugging Face id's branch, tag or commit (default: main)",
)
@click.option("--draft-revision", default=None, help="the draft's, as --target-revision")
@click.option("--method", default="linear", show_default=True)
@click.option(
    "--param",
    "params",
    multiple=True,
    metavar="KEY=VALUE",
    help="method parameter, repeatable (verifier=NAME picks the verifier)",
)
@click.option("--prompt", default=None, help="prompt text")
@click.option("--prompt-ids", default=None, help="prompt token ids, comma-separated")
@click.option("--chat/--no-chat", default=False, help="wrap the prompt in the chat template")
@click.option("--max-new-tokens", type=click.IntRange(min=1), default=64, show_default=True)
@click.option("--temperature", type=Finite(min=0.0), default=0.0, show_default=True)
@click.option(
    "--top-p",
    type=Finite(min=0.0, max=1.0, min_open=True),
    default=1.0,
    show_default=True,
)
@click.option(
    "--draft-temperature",
    type=Finite(min=0.0),
    default=None,
    help="the draft's own temperature (default: the target's)",
)
@click.option(
    "--draft-top-p",
    type=Finite(min=0.0, max=1.0, min_open=True),
    default=None,
    help="the draft's own top-p (default: the target's)",
)
@click.option("--seed", type=click.IntRange(0, 2**64 - 1), default=0, show_default=True)
@click.option("--device", default="auto", show_default=True)
@click.option("--dtype", default="auto", show_default=True)
@click.option(
    "--attn",
    default="sdpa_gqa",
    show_default=True,
    help="target attention: sdpa_gqa (sdpa, grouped heads in the kernel), sdpa, eager, or "
    "tree_triton (Triton tree kernel)",
)
@click.option(
    "--engine",
    type=click.Choice(ENGINE_SPECS),
    default="eager",
    show_default=True,
    help="eager (reference), fast (static KV cache), compiled (fast + torch.compile), graphs "
    "(fast's forwards as CUDA graphs); ENGINE+lean: on our own forward (Llama / Qwen2)",
)
@click.option("--json", "as_json", is_flag=True, help="print tokens, text and stats as JSON")
def generate(
    target,
    draft,
    target_revision,
    draft_revision,
    method,
    params,
    prompt,
    prompt_ids,
    chat,
    max_new_tokens,
    temperature,
    top_p,
    draft_temperature,
    draft_top_p,
    seed,
    device,
    dtype,
    attn,
    engine,
    as_json,
) -> None:
    """Run one generation with one method and print the result."""
    from engine.decode import generate as run  # lazy: torch
    from engine.devices import check_attn  # lazy: torch
    from engine.methods import (  # lazy: torch
        check_standalone,
        check_without_draft,
        method_params,
        resolve_method,
    )
    from engine.models import (
        NO_DRAFT,
        check_engine,
        check_pair_tokenizers,
        load_pair,
        resolve,
    )  # lazy: torch
    from orchestrator.spec import check_generate  # lazy: SQLAlchemy (db.models)

    target, draft = canonical_name(target), canonical_name(draft)  # hub ids of the real pair
    m = resolve_method(method, parse_key_values(params), temperature, draft_temperature)
    check_checkpoints([m])  # a learned component named by the method: trained here
    check_standalone(m)  # nothing a sweep measures first (Sequoia's measured profile)
    if (prompt is None) == (prompt_ids is None):
        raise ConfigError("give exactly one of --prompt TEXT or --prompt-ids 1,2,3")
    ids = _parse_prompt_ids(prompt_ids) if prompt_ids is not None else None
    revisions = (target_revision, draft_revision)
    resolve(target, revision=target_revision), check_attn(attn)
    if draft == NO_DRAFT:
        check_without_draft(m.name)  # ConfigError unless the method is model-free
    else:
        resolve(draft, revision=draft_revision)
        check_pair_tokenizers(target, draft, revisions)  # from their files, before any load
    check_engine(engine, target, *([] if draft == NO_DRAFT else [draft]))
    drafting = {"draft_temperature": draft_temperature, "draft_top_p": draft_top_p}
    tree_temperature = temperature if draft_temperature is None else draft_temperature
    check_generate(target, draft, m, ids, max_new_tokens, tree_temperature, device)
    pair = load_pair(target, draft, device=device, dtype=dtype, attn=attn, revisions=revisions)
    tok = pair.target.tokenizer
    if ids is None:
        ids = (tok.chat_template_encode(prompt) if chat else None) or tok.encode(prompt)
    g = run(
        pair,
        ids,
        m,
        max_new_tokens,
        temperature=temperature,
        top_p=top_p,
        seed=seed,
        engine=engine,
        **drafting,
    )
    text = tok.decode(g.tokens)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "method": m.name,
                    "params": method_params(m),
                    "tokens": g.tokens,
                    "text": text,
                    "stats": g.stats.to_dict(),
                }
            )
        )
        return
    s = g.stats.summary()
    click.echo(text)
    click.echo(
        f"[{m.name}] {s['new_tokens']} tokens in {s['total_s']:.2f}s "
        f"({s['throughput']:.2f} tok/s), {s['tokens_per_iteration']:.2f} tokens/iteration, "
        f"acceptance {s['acceptance_rate']:.3f}",
        err=True,
    )
