"""deploy/kubernetes as a cluster gets it: each overlay rendered, validated, and holding together.

Each overlay (dev, staging, prod) is rendered by ``kubectl kustomize`` (offline: every resource
is a file of this repository) and every object is validated against the Kubernetes API schemas
of ``KUBERNETES``, strictly (an unknown field fails), by kubernetes-validate, which bundles
them: the network is blocked while it runs. Then what no schema says: the probes ask composer's
open paths on its port, the pod runs as the "restricted" Pod Security Standard asks, the grace
period outlasts composer's drain as the code bounds it, every argument is an option of
``composer serve`` (its own parser), the ConfigMap laid out as the kubelet lays out a volume is
the manifests ``composer validate`` accepts and a copy of ``configs/``, and every secret comes
from a Secret the operator creates: none is in the repository.

Without ``kubectl`` these skip with the reason, or fail under ``COMPOSER_REQUIRE_SERVICES=1``
(CI). The last test serves one real turn of each overlay's manifest from that read-only layout,
against the real PostgreSQL and Redis (``services``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import inspect
import json
import re
import shutil
import socket
import subprocess
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from memory.services import postgres_database, unavailable
from memory.stores_fixtures import postgres_dsn, redis_url
from repofiles import CONFIGS, REPO

from composer.cli import main
from composer.cli.commands import serve as serve_command
from composer.cli.main import build_parser
from composer.serve.config import ServerConfig

for module in ("starlette", "uvicorn"):
    pytest.importorskip(module, reason="the serve extra is not installed")

from serve.apps import served  # noqa: E402

from composer.serve import runner  # noqa: E402
from composer.serve.http import CLOSE_S, OPEN_PATHS  # noqa: E402

__all__ = ["postgres_dsn", "redis_url"]  # fixtures, for the last test

KUBERNETES = "1.30"
"""The Kubernetes version every object is validated against: the oldest the manifests run on
(the preStop sleep action is on by default from 1.30)."""

DEPLOY = REPO / "deploy" / "kubernetes"
COPY = DEPLOY / "base" / "manifests"
OVERLAYS = ("dev", "staging", "prod")
KINDS = {
    "Namespace",
    "ConfigMap",
    "Service",
    "Deployment",
    "PodDisruptionBudget",
    "HorizontalPodAutoscaler",
    "NetworkPolicy",
}
NOT_SERVED = {"tests.yaml", "questions.yaml"}
"""Files of ``configs/`` that ``composer serve`` never reads (nor the schemas, for editors):
left out of the copy, as ``make kubernetes-manifests`` leaves them out."""
CONFIGMAP_BYTES = 1 << 20
"""What the API server stores of one ConfigMap at most; a corpus larger than that belongs in
the image or a volume."""

ASSUMED = {"--metrics": 0, "--metrics-port": 1, "--log-format": 1, "--watch": 0}
"""Options a Deployment may pass before ``composer serve``'s parser has them, with the values
each takes: one the parser lacks is set aside and its test skips naming it; an option the
parser has is always parsed, so a usage error in the Deployment fails."""


# ------------------------------------------------------------------ rendering


def _kubectl() -> str:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        unavailable("kubectl is not installed: it renders deploy/kubernetes (kubectl kustomize)")
    return kubectl


@functools.cache
def _rendered(name: str) -> str:
    """``kubectl kustomize`` of the overlay ``name``, once a run."""
    command = [_kubectl(), "kustomize", str(DEPLOY / "overlays" / name)]
    try:
        return subprocess.run(
            command, capture_output=True, text=True, timeout=60, check=True
        ).stdout
    except subprocess.CalledProcessError as e:
        pytest.fail(f"kubectl kustomize of the {name} overlay failed: {e.stderr}")


@pytest.fixture(params=OVERLAYS)
def overlay(request: pytest.FixtureRequest) -> tuple[str, list[dict[str, Any]]]:
    """An overlay's name and its objects as ``kubectl kustomize`` renders them."""
    name: str = request.param
    return name, [o for o in yaml.load_all(_rendered(name), Loader=yaml.CSafeLoader) if o]


def _one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind]
    assert len(found) == 1, f"{len(found)} objects of kind {kind}"
    return found[0]


def _pod(objects: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = _one(objects, "Deployment")["spec"]["template"]["spec"]
    return spec


def _container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    containers = _pod(objects)["containers"]
    assert [c["name"] for c in containers] == ["composer"]
    container: dict[str, Any] = containers[0]
    return container


def _literal_variables(container: dict[str, Any]) -> dict[str, str]:
    """The variables the container's environment sets to a value."""
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


def _secret_variables(container: dict[str, Any]) -> set[str]:
    """The variables the container's environment takes from a Secret."""
    return {e["name"] for e in container["env"] if "secretKeyRef" in e.get("valueFrom", {})}


@contextlib.contextmanager
def _network_blocked() -> Iterator[None]:
    """Every connect and name lookup of this process fails while inside."""

    def blocked(*args: object, **kwargs: object) -> Any:
        raise OSError("network access blocked by the test")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", blocked)
        patch.setattr(socket.socket, "connect_ex", blocked)
        patch.setattr(socket, "create_connection", blocked)
        patch.setattr(socket, "getaddrinfo", blocked)
        yield


def test_every_object_validates_against_the_pinned_kubernetes_schemas(
    overlay: tuple[str, list[dict[str, Any]]],
) -> None:
    name, objects = overlay
    assert {o["kind"] for o in objects} == KINDS, "no Secret, and every kind the guide names"
    problems = []
    with _network_blocked():
        for item in objects:
            try:
                kubernetes_validate.validate(item, KUBERNETES, strict=True)
            except kubernetes_validate.ValidationError as e:
                where = ".".join(str(part) for part in e.path)
                problems.append(f"{item['kind']}/{item['metadata']['name']}: {where}: {e.message}")
    assert not problems, "\n".join(problems)
    namespace = _one(objects, "Namespace")["metadata"]["name"]
    assert namespace == f"composer-{name}"
    others = [o for o in objects if o["kind"] != "Namespace"]
    assert {o["metadata"]["namespace"] for o in others} == {namespace}


def test_every_resource_of_every_kustomization_is_a_file_here() -> None:
    """Nothing is fetched when an overlay is rendered: no remote base, no URL."""
    for kustomization in DEPLOY.rglob("kustomization.yaml"):
        for entry in yaml.safe_load(kustomization.read_text())["resources"]:
            assert "://" not in entry, entry
            assert (kustomization.parent / entry).exists(), entry


# ------------------------------------------------------------------ the Deployment


def test_the_service_budget_autoscaler_and_policy_select_the_deployment_s_pods(
    overlay: tuple[str, list[dict[str, Any]]],
) -> None:
    _, objects = overlay
    deployment = _one(objects, "Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    selectors = [
        _one(objects, "Service")["spec"]["selector"],
        _one(objects, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"],
        _one(objects, "NetworkPolicy")["spec"]["podSelector"]["matchLabels"],
    ]
    for selector in selectors:
        assert selector
        assert selector.items() <= labels.items()
    autoscaler = _one(objects, "HorizontalPodAutoscaler")["spec"]
    assert autoscaler["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": deployment["metadata"]["name"],
    }
    assert 1 <= autoscaler["minReplicas"] <= autoscaler["maxReplicas"]
    assert "replicas" not in deployment["spec"], "the autoscaler owns the count"
    names = {p["name"] for p in _container(objects)["ports"]}
    assert _one(objects, "Service")["spec"]["ports"][0]["targetPort"] in names
    budget = _one(objects, "PodDisruptionBudget")["spec"]
    assert budget["maxUnavailable"] == 1, "one replica (dev) must not block a node's drain"


def _served(container: dict[str, Any]) -> tuple[list[str], set[str]]:
    """The container's ``composer serve`` words without the options the parser does not have
    yet (``ASSUMED``), and those options."""
    words = [*container["command"], *container["args"]]
    assert words[:2] == ["composer", "serve"], words
    pending: set[str] = set()
    kept: list[str] = []
    skip = 0
    for word in words[1:]:
        if skip:
            skip -= 1
            continue
        option = word.split("=", 1)[0]
        if option in ASSUMED and not _parser_has(option):
            pending.add(option)
            skip = 0 if "=" in word else ASSUMED[option]
            continue
        kept.append(word)
    return kept, pending


def _parser_has(option: str) -> bool:
    """Whether ``composer serve`` has ``option`` (whatever values it then accepts)."""
    parser = argparse.ArgumentParser(exit_on_error=False)
    serve_command.add_arguments(parser)
    try:
        _, extras = parser.parse_known_args([option, *["1"] * ASSUMED[option]])
    except argparse.ArgumentError:
        return True  # known, not with this value
    return option not in extras


def _parsed(container: dict[str, Any]) -> ServerConfig:
    words, _ = _served(container)
    args = build_parser({"serve"}).parse_args(words)
    fields = [field.name for field in dataclasses.fields(ServerConfig)]
    return ServerConfig(**{name: getattr(args, name) for name in fields})


def test_every_argument_is_an_option_of_composer_serve(
    overlay: tuple[str, list[dict[str, Any]]],
) -> None:
    """The arguments parse with composer's own parser and make a config it accepts; the
    secrets they read are ``${NAME}``s the Secret fills, never a value."""
    _, objects = overlay
    container = _container(objects)
    config = _parsed(container)  # a usage error fails here, as `composer serve` would exit 2
    assert config.host == "0.0.0.0"
    assert config.workers >= 1
    assert not any(re.search(r"://[^/\s]*@", word) for word in container["args"]), "a password"
    secret = _secret_variables(container)
    assert config.state is not None
    assert re.fullmatch(r"\$\{(\w+)\}", config.state), "--state names a variable, not a URL"
    assert config.state[2:-1] in secret
    assert config.token_var in secret, "off loopback composer serve needs its token"
    assert config.principals is None
    assert config.token_file is None
    _, pending = _served(container)
    if pending:
        pytest.skip(f"composer serve has no {', '.join(sorted(pending))} yet (issue 35)")


def test_the_probes_ask_composer_s_open_paths_on_its_port(
    overlay: tuple[str, list[dict[str, Any]]],
) -> None:
    _, objects = overlay
    container = _container(objects)
    port = _parsed(container).port
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    paths = {}
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        get = container[probe]["httpGet"]
        assert ports.get(get["port"], get["port"]) == port, probe
        assert get["path"] in OPEN_PATHS, f"{probe}: a probe sends no token"
        paths[probe] = get["path"]
    assert paths == {
        "startupProbe": "/healthz",  # listening
        "livenessProbe": "/healthz",  # the loop runs
        "readinessProbe": "/readyz",  # warmed up, the state store answers
    }


def test_the_grace_period_outlasts_composer_s_drain(
    overlay: tuple[str, list[dict[str, Any]]],
) -> None:
    """The kubelet kills at the grace period, counted from the preStop sleep: the sleep, the
    drain delay (``--drain-delay``: readiness false, still serving), the requests in flight
    (uvicorn's graceful timeout, which `composer serve` leaves at the default of
    ``runner.serve``) and the providers' closing (``CLOSE_S``) must fit before."""
    _, objects = overlay
    pod = _pod(objects)
    pre_stop = _container(objects)["lifecycle"]["preStop"]
    sleep = pre_stop["sleep"]["seconds"]
    assert sleep >= 1, "the endpoints must drop the pod before composer stops accepting"
    drain = _parsed(_container(objects)).drain_delay
    graceful = inspect.signature(runner.serve).parameters["graceful_s"].default
    assert pod["terminationGracePeriodSeconds"] > sleep + drain + graceful + CLOSE_S


def test_the_pod_runs_as_the_restricted_pod_security_standard_asks(
    overlay: tuple[str, list[dict[str, Any]]],
) -> None:
    _, objects = overlay
    pod, container = _pod(objects), _container(objects)
    context = {**pod["securityContext"], **container["securityContext"]}
    assert context["runAsNonRoot"] is True
    assert context.get("runAsUser", 1) != 0
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}
    assert context["allowPrivilegeEscalation"] is False
    assert context["readOnlyRootFilesystem"] is True
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert not context.get("privileged", False)
    assert pod["automountServiceAccountToken"] is False
    assert pod["enableServiceLinks"] is False, "COMPOSER_* variables for a Service named composer"
    assert not any(pod.get(host) for host in ("hostNetwork", "hostPID", "hostIPC"))
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert {kind for v in volumes.values() for kind in v if kind != "name"} <= {
        "configMap",
        "emptyDir",
    }
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert volumes[mounts["/tmp"]["name"]]["emptyDir"]["sizeLimit"], "the one writable place"
    manifests = mounts["/etc/composer/manifests"]
    assert manifests["readOnly"] is True
    assert "subPath" not in manifests, "a subPath mount never sees a ConfigMap update"
    resources = container["resources"]
    assert set(resources["requests"]) == set(resources["limits"]) == {"cpu", "memory"}


def test_every_variable_comes_from_the_secret(
    overlay: tuple[str, list[dict[str, Any]]],
) -> None:
    """A literal value in the environment is only the choice of manifest; every other is a
    key of the one Secret, `composer`."""
    _, objects = overlay
    container = _container(objects)
    assert set(_literal_variables(container)) == {"COMPOSER_ENV"}
    refs = [e["valueFrom"]["secretKeyRef"] for e in container["env"] if "valueFrom" in e]
    assert refs
    assert all(r["name"] == "composer" for r in refs)
    assert not container.get("envFrom")


def test_no_secret_is_in_the_repository() -> None:
    """No file under deploy/ is a Secret, holds one (a List's item) or generates one: the
    operator creates it (the guide's command), so no value can be committed by mistake."""
    for path in DEPLOY.rglob("*.y*ml"):
        for document in yaml.safe_load_all(path.read_text()):
            assert not list(_secrets_in(document)), f"{path} holds a Secret"


def _secrets_in(node: object) -> Iterator[object]:
    """Every Secret object, or kustomize generator of one, anywhere in a YAML document."""
    if isinstance(node, dict):
        if node.get("kind") == "Secret" or "secretGenerator" in node:
            yield node
        for value in node.values():
            yield from _secrets_in(value)
    elif isinstance(node, list):
        for value in node:
            yield from _secrets_in(value)


def test_the_container_recipe_says_ci_does_not_build_it_and_installs_extras_that_exist() -> None:
    recipe = (DEPLOY / "Containerfile").read_text()
    first = recipe.splitlines()[0]
    assert first.startswith("#")
    assert "CI does not build" in first
    installed = re.search(r"pip install '/src\[([\w,-]+)\]'", recipe)
    assert installed is not None
    extras = set(installed.group(1).split(","))
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert {"serve", "postgres", "redis"} <= extras <= set(declared["optional-dependencies"])


# ------------------------------------------------------------------ the ConfigMap


def _project(objects: list[dict[str, Any]], folder: Path) -> Path:
    """The manifests volume as the kubelet writes it: the ConfigMap's keys at their items'
    paths in a timestamped folder, a ``..data`` link to it, and a link per top-level name into
    ``..data`` (its atomic writer swaps ``..data`` on an update)."""
    pod = _pod(objects)
    volume = next(v for v in pod["volumes"] if v["name"] == "manifests")["configMap"]
    data = next(o for o in objects if o["kind"] == "ConfigMap")["data"]
    assert (
        volume["name"] == next(o for o in objects if o["kind"] == "ConfigMap")["metadata"]["name"]
    )
    version = folder / "..2026_01_01_00_00_00.000000001"
    for item in volume["items"]:
        target = version / item["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(data[item["key"]], encoding="utf-8")
    (folder / "..data").symlink_to(version.name)
    for top in {Path(item["path"]).parts[0] for item in volume["items"]}:
        (folder / top).symlink_to(Path("..data") / top)
    return folder


def _served_files() -> dict[str, bytes]:
    """What of ``configs/`` composer serve reads in Kubernetes, by path: the manifests and the
    corpus (its memory is PostgreSQL's, imported once, not seeded from a file beside them)."""
    files = [
        *(p for p in CONFIGS.glob("*.yaml") if p.name not in NOT_SERVED),
        *(CONFIGS / "corpus").rglob("*.md"),
    ]
    return {p.relative_to(CONFIGS).as_posix(): p.read_bytes() for p in files}


def test_the_manifests_folder_is_a_copy_of_configs() -> None:
    """kustomize reads nothing outside deploy/kubernetes/base, so it holds a copy."""
    copy = {p.relative_to(COPY).as_posix(): p.read_bytes() for p in COPY.rglob("*") if p.is_file()}
    served = _served_files()
    assert sorted(copy) == sorted(served), "run `make kubernetes-manifests`"
    differ = [path for path in served if copy[path] != served[path]]
    assert not differ, f"{differ} differ from configs/: run `make kubernetes-manifests`"


def test_the_configmap_holds_every_manifest_at_its_path_and_composer_validates_them(
    overlay: tuple[str, list[dict[str, Any]]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, objects = overlay
    configmap = _one(objects, "ConfigMap")
    data = configmap["data"]
    assert sum(len(key) + len(value.encode()) for key, value in data.items()) < CONFIGMAP_BYTES
    items = next(v for v in _pod(objects)["volumes"] if v["name"] == "manifests")["configMap"]
    keys = [item["key"] for item in items["items"]]
    assert sorted(keys) == sorted(data), "each key of the ConfigMap projected once"
    own = {p.name for p in (DEPLOY / "base").glob("kubernetes-*.yaml")}
    paths = {item["path"] for item in items["items"]}
    listed = "listed in base/kustomization.yaml and in the Deployment's manifests volume"
    assert paths == set(_served_files()) | own, f"each file of base/manifests {listed}"
    for item in items["items"]:
        path = Path(item["path"])
        source = COPY / path if path.name not in own else DEPLOY / "base" / path.name
        assert data[item["key"]] == source.read_text(encoding="utf-8"), item["key"]
    folder = _project(objects, tmp_path / "manifests")
    env = _literal_variables(_container(objects))["COMPOSER_ENV"]
    assert env == f"kubernetes-{name}"
    assert (folder / f"{env}.yaml").is_file()
    assert main(["validate", str(folder), "--env", env, "--no-interpolate", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["valid"]
    assert not document["errors"]
    needed = {variable["name"] for variable in document["environments"][0]["variables"]["needed"]}
    assert needed
    assert needed <= _secret_variables(_container(objects))


# ------------------------------------------------------------------ one served turn


def test_each_overlay_serves_a_turn_from_the_kubelet_s_layout_with_its_stores(
    overlay: tuple[str, list[dict[str, Any]]],
    tmp_path: Path,
    postgres_dsn: str,
    redis_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The server the Deployment's arguments configure (one worker: the app in this
    process), the overlay's manifest read through the ConfigMap's links, a database of its own
    for the state, the memory (imported once, as the guide says) and the audit table, and the
    real Redis: ready, one turn with the runbooks and the team's notes, audited in PostgreSQL,
    and nothing written beside the manifests."""
    name, objects = overlay
    container = _container(objects)
    chosen = _literal_variables(container)["COMPOSER_ENV"]  # as composer serve reads it
    config = dataclasses.replace(_parsed(container), workers=1, env=chosen)
    folder = _project(objects, tmp_path / "manifests")
    before = sorted(folder.rglob("*"))
    token = uuid.uuid4().hex
    with postgres_database(postgres_dsn) as dsn:
        imported = ["memory", "import", str(CONFIGS / "memory.jsonl"), dsn]
        assert main([*imported, "--schema", "composer_memory"]) == 0, capsys.readouterr()
        env = {
            "COMPOSER_DSN": dsn,
            "REDIS_URL": redis_url,
            "STATUS_TOKEN": "placeholder-for-tests",
            config.token_var: token,
        }
        with served(folder, config, env=env) as client:
            answer = client.post(
                "/v1/turns",
                headers={"Authorization": f"Bearer {token}"},
                json={
                    "branch": {"id": f"k8s-{name}", "name": "payments"},
                    "system": "You are the on-call assistant.\n",
                    "instruction": {"text": "How do I roll back a deploy with deployctl?"},
                },
            )
            assert answer.status_code == 200, answer.text
            outcomes = {o["name"]: o["outcome"] for o in answer.json()["report"]["outcomes"]}
            assert outcomes["runbooks"] == outcomes["team-memory"] == "fired", outcomes
            assert "deploy-rollback.md" in answer.json()["guidance"]
        capsys.readouterr()
        assert main(["audit", "list", dsn, "--schema", "composer_audit", "--json"]) == 0
        listed = json.loads(capsys.readouterr().out)
        assert [turn["branch_id"] for turn in listed["turns"]] == [f"k8s-{name}"]
    assert sorted(folder.rglob("*")) == before, "the ConfigMap's folder is read-only"
