"""`veritrain export`: the model a round attested, out of a node's data dir, in the Hugging Face
Llama layout (`config.json` + `model.safetensors`, which `transformers` loads).

"Round N's model" is the one round N attested when it finalized: the chain's
`rounds.model_hash(N + 1)`, which round N + 1 trains on (after a fallback it is round N's own
starting model). Nodes keep the global states they used or certified under their hash in
`<data dir>/blobs/`, so a validator's data dir holds every model it signed. The blob is checked
against the chain's hash before it is decoded; the outer optimizer's momentum, part of the
global state, has no place in the Hugging Face layout and is left out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from protocol.core.errors import VeritrainError


class ExportError(VeritrainError):
    """Raised when a round's model cannot be exported: not attested yet, not held, not a Llama."""


def export(
    round_: Annotated[int, typer.Option("--round", min=0, help="Export the model this round attested when it finalized")],
    out: Annotated[Path, typer.Option(help="Folder to write config.json and model.safetensors to")],
    data_dir: Annotated[Path, typer.Option(help="A node's data dir holding that model (a validator's holds "
                                                "every model it certified)")],
    rpc: Annotated[str, typer.Option(help="JSON-RPC URL of the chain")] = "http://127.0.0.1:8545",
    deployment: Annotated[Path, typer.Option(help="Deployment file written by `veritrain deploy`")] = Path("deployment.json"),
) -> None:
    """Write the model a round attested as a Hugging Face Llama checkpoint folder."""
    from protocol.chain.backend import connect
    from protocol.chain.client import ChainClient
    from protocol.chain.deployment import load_deployment
    from protocol.config.run_setup import resolve

    dep = load_deployment(deployment)
    setup = resolve(dep.run_config)
    model = llama_model(setup.model)  # refused before touching the chain
    client = ChainClient(connect(rpc), dep)
    client.check_deployment()
    model_hash = attested_model(client, round_)
    typer.echo(f"round {round_} attested model {model_hash.hex()}", err=True)
    for path in export_state(model, model_hash, data_dir, out, setup.stage_split):
        typer.echo(f"wrote {path}")


def llama_model(model: Any) -> Any:
    from protocol.config.model_overrides import family_of

    if family_of(model) != "llama":
        raise ExportError(f"only Llama models export to the Hugging Face layout; this run's model is a "
                          f"{family_of(model)} model")
    return model


def attested_model(client: Any, round_: int) -> bytes:
    """The model hash round `round_` attested (see the module docstring)."""
    current = client.current_round() if client.started() else None
    if current is None or round_ > current:
        raise ExportError(f"round {round_} does not exist (current round: {'none' if current is None else current})")
    if not client.read.rounds.finalized(round_):
        phase = client.phase(round_).name.lower().replace("_", " ")
        raise ExportError(f"round {round_} has not finalized (phase: {phase}); its model is attested when it does")
    return client.read.rounds.model_hash(round_ + 1)


def export_state(model: Any, model_hash: bytes, data_dir: Path, out: Path, split: Any = None) -> list[Path]:
    """Decode the global state `model_hash` from `data_dir` and write it to `out` (Hugging Face
    layout); returns the files written. A staged run's (`split`) is its stage index and the
    stage blobs it names, joined."""
    from protocol.config.hf_checkpoint import save_hf_llama
    from protocol.core.aggregation.state import StateFormatError
    from protocol.core.pipeline.staged_bundle import bundle_stages, decode_model
    from protocol.core.pipeline.staged_state import read_stage_index

    llama_model(model)
    blobs = data_dir / "blobs"
    if not blobs.is_dir():
        raise ExportError(f"{data_dir} is not a node's data dir (it has no blobs/ folder)")
    blob = _held(blobs, model_hash)
    try:
        if split is not None:
            blob = bundle_stages([_held(blobs, h) for h in read_stage_index(blob, split)])[0]
        state = decode_model(blob, model, split, model_hash)
    except StateFormatError as exc:
        raise ExportError(f"{blobs / model_hash.hex()} is not this run's global state: {exc}") from exc
    return save_hf_llama(model, state.params, out)


def _held(blobs: Path, blob_hash: bytes) -> bytes:
    """A blob of the data dir, checked against its name."""
    from protocol.core.crypto.hashing import content_hash

    # read by path, not through BlobStore: opening a store sweeps the temp files a running node writes
    path = blobs / blob_hash.hex()
    if not path.is_file():
        raise ExportError(f"{blobs.parent} does not hold the model {blob_hash.hex()[:16]}…; export from the data "
                          f"dir of a validator that certified it, or of a miner that trained on it")
    blob = path.read_bytes()
    if content_hash(blob) != blob_hash:
        raise ExportError(f"{path} is corrupt: its bytes do not hash to its name")
    return blob


def install(app: typer.Typer, wrap: Any) -> None:
    app.command(name="export")(wrap(export))
