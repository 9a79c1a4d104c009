"""The deployment files in docker/, checked without a container engine.

There is no container engine on the development machines or in CI, so the stack is never
started here. Instead:

- docker/compose.yaml is validated against the Compose Specification's JSON schema
  (tests/data/compose-spec.json), before and after variable interpolation, and read with
  duplicate keys refused (the Compose loader refuses them; PyYAML would keep the last);
- the points a reviewer checks by eye are asserted: the services the stack needs, two
  databases with their own users, the landing zone and release store volumes mounted where
  the DAG file looks for them, the DAG folder, images built from docker/Dockerfile,
  healthchecks, start order, every named volume and required variable declared;
- docker/Dockerfile is on the official Airflow image of the version locked in uv.lock and
  installs the packages pyproject.toml builds, all of which /.dockerignore lets through;
- every check is also run on broken copies of the files, which it must reject.

tests/data/compose-spec.json is schema/compose-spec.json of the compose-spec/compose-spec
repository at commit 00655e2222608fa6eaecdf12ac5195889ca2244a (74,133 characters,
unmodified; the schema `docker compose` validates against). To update it, replace the file
with a newer schema/compose-spec.json and change the commit here and in docker/README.md.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[1]
DOCKER = ROOT / "docker"
COMPOSE_FILE = DOCKER / "compose.yaml"
DOCKERFILE = DOCKER / "Dockerfile"
ENV_EXAMPLE = DOCKER / ".env.example"
INIT_SCRIPT = DOCKER / "init-databases.sh"
DOCKERIGNORE = ROOT / ".dockerignore"
SCHEMA_FILE = Path(__file__).parent / "data" / "compose-spec.json"

# The services the issue asks for, and the Airflow command each Airflow service runs.
AIRFLOW_COMMANDS = {
    "airflow-apiserver": "api-server",
    "airflow-scheduler": "scheduler",
    "airflow-dag-processor": "dag-processor",
    "airflow-triggerer": "triggerer",
}
AIRFLOW_SERVICES = ["airflow-init", *AIRFLOW_COMMANDS]
REQUIRED_SERVICES = ["postgres", *AIRFLOW_SERVICES]
LONG_RUNNING = ["postgres", *AIRFLOW_COMMANDS]
DAGS_TARGET = "/opt/airflow/dags"
INIT_DIR = "/docker-entrypoint-initdb.d/"


# ---------------------------------------------------------------------------------------
# Reading the files


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing duplicate keys in a mapping as the Compose loader does
    (merge keys `<<:` may still be overridden, as YAML allows)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_compose(text: str) -> dict[str, Any]:
    doc = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: no arbitrary objects
    assert isinstance(doc, dict), "a Compose file is a mapping"
    return doc


_VARIABLE = re.compile(
    r"\$(?:\$"  # $$: a literal $
    r"|\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}"  # ${VAR}, ${VAR:-x}, ${VAR:?x}
    r"|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))"  # $VAR
)


class MissingVariable(Exception):
    pass


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's variable interpolation: $$, $VAR, ${VAR}, ${VAR:-default}, ${VAR-default},
    ${VAR:?error}, ${VAR?error}; applied to every string of the document (not to keys)."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group("name") or m.group("bare")
        op, arg = m.group("op"), m.group("arg") or ""
        current = env.get(name)
        unset_or_empty = current is None or (current == "" and op is not None and op.startswith(":"))
        if op in (":-", "-"):
            return arg if unset_or_empty else str(current)
        if op in (":?", "?"):
            if unset_or_empty:
                raise MissingVariable(f"{name}: {arg}")
            return str(current)
        return current or ""

    return _VARIABLE.sub(one, value)


def required_variables(text: str) -> set[str]:
    """Variables the Compose file cannot do without: ${VAR:?...} or ${VAR?...}."""
    return {m.group("name") for m in _VARIABLE.finditer(text) if m.group("op") in (":?", "?")}


def env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines of an env file (comments and blank lines skipped)."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, sep, value = line.partition("=")
            assert sep, f"{path.name}: not KEY=VALUE: {line!r}"
            out[key.strip()] = value.strip()
    return out


def filled_env_example() -> dict[str, str]:
    """.env.example with every empty (secret) value filled in, as a user would."""
    return {k: v or f"test-{k.lower()}" for k, v in env_file(ENV_EXAMPLE).items()}


@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SCHEMA_FILE.read_text())
    # the schema declares draft-07 as "https://json-schema.org/draft-07/schema" (no trailing
    # '#'), which jsonschema does not recognise; name the draft instead of falling back
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


@pytest.fixture(scope="module")
def compose_text() -> str:
    return COMPOSE_FILE.read_text()


@pytest.fixture(scope="module")
def compose(compose_text: str) -> dict[str, Any]:
    return load_compose(compose_text)


def schema_errors(validator: jsonschema.protocols.Validator, doc: dict[str, Any]) -> list[str]:
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
        for e in sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))
    ]


# ---------------------------------------------------------------------------------------
# What a reviewer checks by eye, as a function returning the problems found


def _environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.partition("=")[::2] for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def _mounts(service: dict[str, Any]) -> list[dict[str, Any]]:
    """The service's mounts in long syntax (short syntax converted)."""
    out = []
    for v in service.get("volumes") or []:
        if isinstance(v, dict):
            out.append(v)
            continue
        parts = v.split(":")
        source, target = (parts[0], parts[1]) if len(parts) > 1 else ("", parts[0])
        kind = "bind" if source.startswith((".", "/", "~", "$")) else "volume"
        out.append({"type": kind, "source": source, "target": target, "read_only": parts[2:] == ["ro"]})
    return out


def _command(service: dict[str, Any]) -> str:
    cmd = service.get("command") or ""
    return " ".join(cmd) if isinstance(cmd, list) else str(cmd)


def _depends(service: dict[str, Any]) -> dict[str, str]:
    dep = service.get("depends_on") or {}
    if isinstance(dep, list):
        return dict.fromkeys(dep, "service_started")
    return {name: spec.get("condition", "service_started") for name, spec in dep.items()}


def _bind_source(source: str) -> Path:
    """Host path of a bind mount, relative to docker/, with variables at their defaults."""
    return (DOCKER / interpolate(source, {})).resolve()


def _db_of(url: str) -> tuple[str, str, str] | None:
    """(user, host, database) of a PostgreSQL SQLAlchemy URL, None for any other URL."""
    m = re.fullmatch(
        r"postgresql(?:\+\w+)?://(?P<user>[^:@/]+)(?::[^@]*)?@(?P<host>[^:/]+)(?::\d+)?/(?P<db>[^?]+)", url
    )
    return (m["user"], m["host"], m["db"]) if m else None


def review(doc: dict[str, Any], init_script: str) -> list[str]:
    problems: list[str] = []
    services: dict[str, Any] = doc.get("services") or {}
    volumes: dict[str, Any] = doc.get("volumes") or {}

    for name in REQUIRED_SERVICES:
        if name not in services:
            problems.append(f"service {name} missing")
    if problems:
        return problems

    # the databases: two, each with its own owner, created by the init script
    created = dict(re.findall(r"CREATE DATABASE\s+(\w+)\s+OWNER\s+(\w+)", init_script, re.IGNORECASE))
    if set(created) != {"airflow", "serialpub"}:
        problems.append(f"the init script creates databases {sorted(created)}, not airflow and serialpub")
    if not any(
        m.get("type") == "bind"
        and m.get("target", "").startswith(INIT_DIR)
        and _bind_source(m.get("source", "")) == INIT_SCRIPT
        for m in _mounts(services["postgres"])
    ):
        problems.append(f"postgres does not mount docker/{INIT_SCRIPT.name} into {INIT_DIR}")
    if not any(
        m.get("type") == "volume" and m.get("target") == "/var/lib/postgresql/data"
        for m in _mounts(services["postgres"])
    ):
        problems.append("postgres keeps its data in no named volume")

    for name in AIRFLOW_SERVICES:
        svc = services[name]
        env = _environment(svc)

        # image built from docker/Dockerfile with the repository as context
        build = svc.get("build")
        if not isinstance(build, dict):
            problems.append(f"{name}: no build section pointing at docker/Dockerfile")
        else:
            context = (DOCKER / build.get("context", ".")).resolve()
            if context != ROOT or (context / build.get("dockerfile", "Dockerfile")).resolve() != DOCKERFILE:
                problems.append(f"{name}: builds {build}, not docker/Dockerfile from the repository root")

        # executor, metadata database, state database
        if env.get("AIRFLOW__CORE__EXECUTOR") != "LocalExecutor":
            problems.append(f"{name}: executor is {env.get('AIRFLOW__CORE__EXECUTOR')!r}, not LocalExecutor")
        if env.get("AIRFLOW__CORE__LOAD_EXAMPLES", "").lower() != "false":
            problems.append(f"{name}: AIRFLOW__CORE__LOAD_EXAMPLES is not false")
        for key in (
            "AIRFLOW__CORE__FERNET_KEY",
            "AIRFLOW__API_AUTH__JWT_SECRET",
            "AIRFLOW__API__SECRET_KEY",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS",
        ):
            if not env.get(key):
                problems.append(f"{name}: {key} not set")
        dbs = {}
        for key in ("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "SERIALPUB_DATABASE_URL"):
            dbs[key] = _db_of(env.get(key, ""))
            if dbs[key] is None:
                problems.append(f"{name}: {key} is not a PostgreSQL URL: {env.get(key)!r}")
        if all(dbs.values()):
            (a_user, a_host, a_db), (s_user, s_host, s_db) = dbs.values()  # type: ignore[misc]
            if (a_db, s_db) != ("airflow", "serialpub") or a_user == s_user:
                problems.append(
                    f"{name}: Airflow uses {a_user}@{a_db} and serialpub {s_user}@{s_db}: "
                    "not the two databases with their own users"
                )
            if {a_host, s_host} != {"postgres"}:
                problems.append(f"{name}: the databases are not on the postgres service")
            for db, user in ((a_db, a_user), (s_db, s_user)):
                if created.get(db, user) != user:
                    problems.append(f"{name}: connects to {db} as {user}, but {created[db]} owns it")

        # the workspace, its landing zone and release store, the DAG folder
        workspaces = [w for w in env.get("SERIALPUB_WORKSPACES", "").split(":") if w]
        if not workspaces:
            problems.append(f"{name}: SERIALPUB_WORKSPACES not set")
        mounts = {m.get("target"): m for m in _mounts(svc)}
        for ws in workspaces:
            if mounts.get(ws, {}).get("type") != "bind":
                problems.append(f"{name}: workspace {ws} is not mounted from the host")
            for sub in ("landing", "releases"):
                m = mounts.get(f"{ws}/{sub}")
                if not m or m.get("type") != "volume" or m.get("source") not in volumes:
                    problems.append(f"{name}: no named volume mounted at {ws}/{sub}")
                elif m.get("read_only"):
                    problems.append(f"{name}: {ws}/{sub} is read-only")
        dags = mounts.get(DAGS_TARGET)
        if not dags or dags.get("type") != "bind" or _bind_source(dags.get("source", "")) != ROOT / "dags":
            problems.append(f"{name}: ../dags is not mounted at {DAGS_TARGET}")

    # the same secrets in every Airflow component (JWTs are checked across them)
    for key in ("AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW__CORE__FERNET_KEY", "AIRFLOW__API__SECRET_KEY"):
        if len({_environment(services[n]).get(key) for n in AIRFLOW_SERVICES}) != 1:
            problems.append(f"{key} differs between the Airflow services")

    # what each service runs
    for name, sub in AIRFLOW_COMMANDS.items():
        if _command(services[name]).split()[:1] != [sub]:
            problems.append(f"{name}: runs {_command(services[name])!r}, not airflow {sub}")
    init = _command(services["airflow-init"])
    for step in ("airflow db migrate", "serialpub db upgrade"):
        if step not in init:
            problems.append(f"airflow-init does not run {step}")
    if not any(str(p).endswith(":8080") for p in services["airflow-apiserver"].get("ports") or []):
        problems.append("airflow-apiserver does not publish port 8080")

    # health and start order
    for name in LONG_RUNNING:
        if not (services[name].get("healthcheck") or {}).get("test"):
            problems.append(f"{name}: no healthcheck")
    for name in AIRFLOW_SERVICES:
        deps = _depends(services[name])
        if deps.get("postgres") != "service_healthy":
            problems.append(f"{name}: does not wait for a healthy postgres")
        if name != "airflow-init" and deps.get("airflow-init") != "service_completed_successfully":
            problems.append(f"{name}: does not wait for airflow-init to complete")

    # references the schema cannot check
    for name, svc in services.items():
        for dep in _depends(svc):
            if dep not in services:
                problems.append(f"{name}: depends on unknown service {dep}")
        for m in _mounts(svc):
            if m.get("type") == "volume" and m.get("source") and m["source"] not in volumes:
                problems.append(f"{name}: named volume {m['source']} not declared under volumes")
    return problems


# ---------------------------------------------------------------------------------------
# The Compose file as it is


def test_compose_file_matches_the_compose_specification(validator, compose):
    assert schema_errors(validator, compose) == []


def test_compose_file_matches_the_specification_after_interpolation(validator, compose):
    # what `docker compose config` sees with a filled-in docker/.env
    assert schema_errors(validator, interpolate(compose, filled_env_example())) == []


def test_compose_file_passes_review(compose):
    assert review(compose, INIT_SCRIPT.read_text()) == []


def test_every_required_variable_is_in_env_example(compose_text):
    required = required_variables(compose_text)
    assert required, "the secrets are expected to be required variables"
    example = env_file(ENV_EXAMPLE)
    assert sorted(required - set(example)) == []
    assert all(example[name] == "" for name in required), "no secret value in .env.example"


def test_missing_secret_stops_interpolation(compose):
    env = filled_env_example()
    del env["AIRFLOW_JWT_SECRET"]
    with pytest.raises(MissingVariable, match="AIRFLOW_JWT_SECRET"):
        interpolate(compose, env)


def test_init_script_reads_the_passwords_compose_passes(compose):
    env = _environment(compose["services"]["postgres"])
    script = INIT_SCRIPT.read_text()
    for name in re.findall(r"\$\{(\w+_DB_PASSWORD)", script):
        assert name in env, f"init-databases.sh reads {name}, which postgres does not get"


# ---------------------------------------------------------------------------------------
# Broken copies: each check must reject them


def detached(doc: dict[str, Any]) -> dict[str, Any]:
    """A copy sharing nothing: YAML anchors make several services share one `environment`
    mapping, which copy.deepcopy would keep shared, so a change to one service changed all."""
    return json.loads(json.dumps(doc))


def _drop(path: list[str]) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        node = doc
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]

    return mutate


def _rename(path: list[str], new: str) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        node = doc
        for key in path[:-1]:
            node = node[key]
        node[new] = node.pop(path[-1])

    return mutate


def _set(path: list[str], value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        node = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return mutate


def _unmount(service: str, target_suffix: str) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        svc = doc["services"][service]
        svc["volumes"] = [m for m in _mounts(svc) if not m["target"].endswith(target_suffix)]

    return mutate


# name: (how to break the file, what the review must say)
REVIEW_BREAKS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "one database for both": (
        _set(
            ["services", "airflow-scheduler", "environment", "SERIALPUB_DATABASE_URL"],
            "postgresql+psycopg://airflow:x@postgres:5432/airflow",
        ),
        "not the two databases with their own users",
    ),
    "state in SQLite": (
        _set(["services", "airflow-scheduler", "environment", "SERIALPUB_DATABASE_URL"], "sqlite:////tmp/s.sqlite"),
        "SERIALPUB_DATABASE_URL is not a PostgreSQL URL",
    ),
    "release store not mounted": (
        _unmount("airflow-scheduler", "/releases"),
        "airflow-scheduler: no named volume mounted at /opt/serialpub/workspaces/adult/releases",
    ),
    "landing zone not mounted": (
        _unmount("airflow-triggerer", "/landing"),
        "airflow-triggerer: no named volume mounted at /opt/serialpub/workspaces/adult/landing",
    ),
    "DAG folder not mounted": (
        _unmount("airflow-dag-processor", "/dags"),
        "airflow-dag-processor: ../dags is not mounted",
    ),
    "starts before migration": (
        _drop(["services", "airflow-scheduler", "depends_on", "airflow-init"]),
        "airflow-scheduler: does not wait for airflow-init",
    ),
    "init skips serialpub": (
        _set(["services", "airflow-init", "command"], ["-c", "airflow db migrate"]),
        "airflow-init does not run serialpub db upgrade",
    ),
}


@pytest.mark.parametrize(("mutation", "expected"), REVIEW_BREAKS.values(), ids=REVIEW_BREAKS.keys())
def test_review_rejects_a_broken_compose_file(compose, mutation, expected):
    broken = detached(compose)
    mutation(broken)
    problems = review(broken, INIT_SCRIPT.read_text())
    assert any(expected in p for p in problems), problems


def test_review_rejects_an_init_script_with_one_database(compose):
    script = INIT_SCRIPT.read_text().replace("CREATE DATABASE serialpub OWNER serialpub;", "")
    assert any("not airflow and serialpub" in p for p in review(compose, script))


def test_duplicate_keys_are_refused(compose_text):
    broken = compose_text.replace("    command: scheduler\n", "    command: scheduler\n    command: triggerer\n", 1)
    assert broken != compose_text
    with pytest.raises(yaml.constructor.ConstructorError, match="duplicate key 'command'"):
        load_compose(broken)


# ---------------------------------------------------------------------------------------
# The Dockerfile and the build context


def _dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def _locked_version(package: str) -> str:
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    versions = {p["version"] for p in lock["package"] if p["name"] == package}
    assert len(versions) == 1, f"{package} locked as {versions}"
    return versions.pop()


def _wheel_packages() -> list[str]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return list(pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"])


def dockerfile_problems(text: str) -> list[str]:
    problems: list[str] = []
    instructions = _dockerfile_instructions(text)
    froms = [args for word, args in instructions if word == "FROM"]
    expected = f"apache/airflow:{_locked_version('apache-airflow')}-python3.11"
    if froms != [expected]:
        problems.append(f"FROM {froms}, expected [{expected!r}] (the apache-airflow locked in uv.lock)")

    copied = set()
    for word, args in instructions:
        if word == "COPY":
            sources = [a for a in args.split() if not a.startswith("--")][:-1]
            copied.update(s.rstrip("/") for s in sources)
    for needed in ["pyproject.toml", "README.md", *_wheel_packages()]:
        if needed not in copied:
            problems.append(f"{needed} is not copied into the image")

    runs = " ".join(args for word, args in instructions if word == "RUN")
    install = re.search(r"pip install ([^&;]*)", runs)
    if not install:
        problems.append("no pip install")
    else:
        args = install.group(1)
        if '"apache-airflow==${AIRFLOW_VERSION}"' not in args:
            problems.append("pip install does not pin apache-airflow==${AIRFLOW_VERSION}")
        if '"/opt/serialpub-src[publisher]"' not in args:
            problems.append("pip install does not install the copied sources with the publisher's extra")
    users = [args for word, args in instructions if word == "USER"]
    if users and users[-1] != "airflow":
        problems.append(f"the image ends as user {users[-1]}, not airflow")
    return problems


def test_dockerfile():
    assert dockerfile_problems(DOCKERFILE.read_text()) == []


def test_python_of_the_image_is_allowed_by_the_project():
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert SpecifierSet(requires).contains("3.11"), f"the image's Python 3.11 is outside requires-python {requires}"
    locked = tomllib.loads((ROOT / "uv.lock").read_text())["requires-python"]
    assert SpecifierSet(locked).contains("3.11"), f"the image's Python 3.11 is outside uv.lock's {locked}"


def _dockerignore_lets_through(text: str, path: str) -> bool:
    """Whether a top-level path reaches the build context: the last matching pattern wins."""
    included = True
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line.lstrip("!").rstrip("/")
        if pattern == "*" or pattern == path:
            included = negate
    return included


def test_dockerignore_lets_only_the_sources_through():
    text = DOCKERIGNORE.read_text()
    copied = {"pyproject.toml", "README.md", "dags", *_wheel_packages()}
    assert sorted(p for p in copied if not _dockerignore_lets_through(text, p)) == []
    kept_out = ["workspace", "workspaces", ".venv", ".tools", ".git", "uv.lock", "tests", "docs", "benchmarks", ".env"]
    assert sorted(p for p in kept_out if _dockerignore_lets_through(text, p)) == []
