"""All configuration in one pydantic-settings object (environment prefix ``MEDFLOWS_``).

Every backend change (PostgreSQL ledger, S3 storage, Dask cluster, another data location) is a
setting, never a code change. See the README's *Settings* table for examples.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

PROJECT_ROOT = Path(__file__).resolve().parents[1]
"""The checkout this package was installed from (editable install)."""


def _state_dir() -> Path:
    return PROJECT_ROOT / ".medflows"


def _rwe_cluster_dir() -> Path:
    """``.medflows/rwe-cluster``; as root, when a folder above it is closed to other users
    (PostgreSQL runs as the ``postgres`` OS user, which must traverse it: a checkout under
    ``/root`` or a ``mktemp -d`` folder), ``medflows-rwe-<digest of that path>`` in the system
    temporary folder instead (emptied on reboot: the cluster is created again on demand)."""
    folder = _state_dir() / "rwe-cluster"
    if os.geteuid() != 0 or all(os.stat(p).st_mode & 0o001 for p in folder.parents
                                if p.exists()):
        return folder
    digest = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"medflows-rwe-{digest}"


class Settings(BaseSettings):
    """Runtime configuration; every field can be set as ``MEDFLOWS_<FIELD>``."""

    model_config = SettingsConfigDict(env_prefix="MEDFLOWS_", frozen=True, extra="ignore")

    storage_url: str = Field(
        default_factory=lambda: str(_state_dir() / "storage"),
        description="fsspec URL of the storage root: a local folder, memory://..., s3://bucket/...",
    )
    ledger_url: str = Field(
        default_factory=lambda: f"sqlite:///{_state_dir() / 'ledger.db'}",
        description="SQLAlchemy URL of the ledger: SQLite file (default) or postgresql+psycopg2://",
    )
    data_root: Path = Field(
        default=PROJECT_ROOT / ".." / "shared" / "data",
        description="Reference data folder (questions, recorded predictions, leaderboards).",
    )
    datasets_dir: Path = Field(
        default=PROJECT_ROOT / "datasets",
        description="Folder of task cards and small reference files shipped with the project.",
    )
    price_snapshot: Path = Field(
        default=PROJECT_ROOT / "datasets" / "prices.yaml",
        description="YAML price snapshot, USD per 1M input/output tokens per model.",
    )
    model_cache_dir: Path | None = Field(
        default=None,
        description="Folder of pretrained weights and data an operator fills, mounted read-only "
                    "at /cache in every research cell's sandbox (None: no cache).",
    )
    sandbox_gpus: bool = Field(
        default=False,
        description="Pass the host's NVIDIA devices (/dev/nvidia*) into research cells' "
                    "sandboxes; refused on a host without one.",
    )
    agents_dir: Path = Field(
        default=PROJECT_ROOT / "agents",
        description="Folder of external agents, one sub-folder each (config.yaml + files).",
    )
    agent_env_dir: Path = Field(
        default_factory=lambda: _state_dir() / "agent-envs",
        description="Local folder of external agents' installed packages (one sub-folder per "
                    "agent and package set, reused across runs).",
    )
    results_dir: Path = Field(
        default_factory=lambda: _state_dir() / "prefect-results",
        description="Where Prefect persists step results so re-runs resume from cache.",
    )
    dask_address: str | None = Field(
        default=None, description="Address of an existing Dask scheduler; unset = LocalCluster."
    )
    llm_api_base: str | None = Field(
        default=None,
        description="OpenAI-compatible endpoint for every litellm call (a local server, a proxy).",
    )
    endpoint_allow_networks: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="CIDRs a registered endpoint's api_base may resolve to although they are not "
        "public (comma-separated, e.g. 127.0.0.1/32 for a local test server, 10.20.0.0/16 for "
        "an on-premises model farm); empty = public addresses only (tasks_lib/netpolicy.py).")
    endpoint_credential_key: SecretStr | None = Field(
        default=None,
        description="Fernet key(s) that encrypt the API keys submitters give with their "
        "endpoints (comma-separated, newest first: older keys still decrypt, for rotation); "
        "unset = endpoints cannot be registered with an api_key.")
    judge_model: str = Field(default="gpt-4o-mini", description="litellm model string of judges.")
    kit_modules: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Track kits kept outside the tree, registered after the shipped catalog by "
        "every composition root (the CLI and flows, the evaluator sandbox): importable module "
        "names (my_org.kits.wound) or paths of a .py file or a package folder "
        "(comma-separated); importing one registers its kit (tasks_lib/tracks/extra.py).")
    flow_heartbeat_s: int | None = Field(
        default=None, ge=30,
        description="Prefect flow-run heartbeat interval for flows the medflows CLI runs (None = "
        "off; see tasks_lib/orchestration.py).")
    max_connections: int = Field(
        default=16, ge=1,
        description="Concurrent model calls per provider endpoint (api_base), shared by every "
        "caller in the process; an agent's `max_connections` param overrides it for its run.",
    )
    rpm_limit: int | None = Field(
        default=None, ge=1,
        description="Requests-per-minute cap per provider endpoint, shared by every caller in "
        "the process (None = no cap; an agent's `rpm` param or --rpm overrides it).")
    tpm_limit: int | None = Field(
        default=None, ge=1,
        description="Tokens-per-minute cap per provider endpoint (prompt + completion; None = "
        "no cap; an agent's `tpm` param or --tpm overrides it).")
    execute_chunk: int = Field(
        default=100, ge=1,
        description="Items per execute task run (one Prefect task per agent x chunk; on Dask "
        "when MEDFLOWS_DASK_ADDRESS is set).")
    llm_cache: bool = Field(
        default=True,
        description="Cache model calls under <storage root>/llm-cache/ (false = always ask).",
    )
    rwe_db_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("MEDFLOWS_RWE_DB_URL", "MEDFLOWS_RWE_DATABASE_URL"),
        description="Admin URL of an existing RWE study-database server (postgresql://user:pw@"
        "host:port/db; must have no trust rules) where `pool build rwe` loads each EHR into its "
        "own database and agents read it; unset = medflows starts its own cluster. "
        "MEDFLOWS_RWE_DATABASE_URL is a deprecated alias.")
    rwe_cluster_dir: Path = Field(
        default_factory=_rwe_cluster_dir,
        description="State folder of medflows' own RWE PostgreSQL cluster (data, socket, log); "
        "default `.medflows/rwe-cluster`, or a folder in the system temporary folder when the "
        "postgres OS user cannot reach that one.")
    rwe_cluster_port: int = Field(
        default=55433, ge=1024, le=65535,
        description="Private port of medflows' own RWE cluster (unix socket only, no TCP).")
    storage_options: dict[str, Any] = Field(
        default_factory=dict,
        description="Extra fsspec options for the storage root (JSON), e.g. an S3 endpoint_url "
        'or nested s3fs options such as {"client_kwargs": {"region_name": "eu-west-1"}}.',
    )

    @field_validator("endpoint_allow_networks", "kit_modules", mode="before")
    @classmethod
    def _comma_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                import json

                return json.loads(text)
            return [v.strip() for v in text.split(",") if v.strip()]
        return value


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (read once from the environment)."""
    return Settings()


def reset_settings() -> None:
    """Forget cached settings (tests change the environment between cases)."""
    get_settings.cache_clear()
