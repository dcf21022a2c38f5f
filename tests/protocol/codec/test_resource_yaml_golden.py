"""The RFC-018 resource texts of the reference's test_serde_yaml.rs (``test_serde_resource_*``):
read into typed values and written back byte for byte, plus the errors its parsers raise."""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass

import pytest

from protocol.codec import yaml as yaml_codec
from protocol.errors import DecodeError
from protocol.identity import AccountName, DatasetId
from protocol.model import (
    JsonValue,
    ResourcePhase,
    Secret,
    Secrets,
    SecretSetSpec,
    SecretSetSpecInput,
    Timestamp,
    Variable,
    Variables,
)
from protocol.resource import (
    GENERIC_SPEC,
    RELATIONS_SCHEMA,
    RELATIONS_SPEC,
    AccountHandle,
    AccountRef,
    AttributeInput,
    RelationInput,
    RelationsSpecInput,
    Resource,
    ResourceAnnotations,
    ResourceConditions,
    ResourceError,
    ResourceHeaders,
    ResourceHeadersInput,
    ResourceInput,
    ResourceLabels,
    ResourceName,
    ResourceRef,
    ResourceStatus,
    SpecCodec,
    TypeRef,
    dump_resource,
    dump_resource_input,
    load_resource,
    load_resource_input,
    model_spec,
    read_resource_input,
    read_secrets,
    read_variables,
    write_resource,
    write_resource_input,
    write_secrets,
    write_variables,
)

SECRET_SET = "https://opendatafabric.org/schemas/config/v1alpha1/SecretSet"
TLS = Secrets({"tls": Secret(value="<cert>")})


def text(block: str) -> str:
    return textwrap.dedent(block).lstrip("\n")


SECRET_SET_INPUT = text("""
    $schema: https://opendatafabric.org/schemas/config/v1alpha1/SecretSet
    headers:
      name: my-secret
    spec:
      secrets:
        tls:
          value: <cert>
    """)


def test_input_generics() -> None:
    headers = ResourceHeadersInput(name=ResourceName("my-secret"))

    typed = load_resource_input(SECRET_SET_INPUT, model_spec("SecretSetSpecInput"))
    assert typed == ResourceInput(
        schema=SECRET_SET, headers=headers, spec=SecretSetSpecInput(secrets=TLS)
    )
    assert dump_resource_input(typed, model_spec("SecretSetSpecInput")) == SECRET_SET_INPUT

    generic = load_resource_input(SECRET_SET_INPUT)
    assert generic == ResourceInput(
        schema=SECRET_SET, headers=headers, spec={"secrets": {"tls": {"value": "<cert>"}}}
    )
    assert dump_resource_input(generic) == SECRET_SET_INPUT


@dataclass(frozen=True)
class MySpec:
    secrets: Secrets
    variables: Variables


MY_SPEC: SpecCodec[MySpec] = SpecCodec(
    read=lambda tree: MySpec(read_secrets(tree["secrets"]), read_variables(tree["variables"])),
    write=lambda spec: {
        "secrets": write_secrets(spec.secrets),
        "variables": write_variables(spec.variables),
    },
)


def test_input_short_forms() -> None:
    data = text("""
        $schema: https://kamu.dev/schemas/core/v1/MyResource
        headers:
          name: my-thing
          account: sergiimk
        spec:
          secrets:
            tls: <cert>
          variables:
            poolSize: '10'
        """)
    value = load_resource_input(data, MY_SPEC)
    assert value == ResourceInput(
        schema="https://kamu.dev/schemas/core/v1/MyResource",
        headers=ResourceHeadersInput(
            name=ResourceName("my-thing"), account=AccountRef(name=AccountName("sergiimk"))
        ),
        spec=MySpec(secrets=TLS, variables=Variables({"poolSize": Variable(value="10")})),
    )
    assert dump_resource_input(value, MY_SPEC) == text("""
        $schema: https://kamu.dev/schemas/core/v1/MyResource
        headers:
          name: my-thing
          account:
            name: sergiimk
        spec:
          secrets:
            tls:
              value: <cert>
          variables:
            poolSize:
              value: '10'
        """)


def test_input_refs() -> None:
    data = text("""
        $schema: https://opendatafabric.org/schemas/auth/v1alpha1/Relations
        headers:
          name: alice-bob
        spec:
          relations:
            - subject:
                type: Account
                name: alice
              relation: role
              value: maintainer
              object:
                type: Dataset
                account: bob
                name: bobs-dataset
          attributes:
            - object: Dataset:bob/bobs-dataset # Short form of `{ type: Dataset, account: bob, name: bobs-dataset }`
              name: allowPublicRead
              value: true
        """)
    bobs_dataset = ResourceRef(
        type=TypeRef("Dataset"),
        account=AccountRef(name=AccountName("bob")),
        name=ResourceName("bobs-dataset"),
    )
    value = load_resource_input(data, RELATIONS_SPEC)
    assert value == ResourceInput(
        schema=RELATIONS_SCHEMA,
        headers=ResourceHeadersInput(name=ResourceName("alice-bob")),
        spec=RelationsSpecInput(
            relations=(
                RelationInput(
                    subject=ResourceRef(type=TypeRef("Account"), name=ResourceName("alice")),
                    relation="role",
                    value="maintainer",
                    object=bobs_dataset,
                ),
            ),
            attributes=(AttributeInput(object=bobs_dataset, name="allowPublicRead", value=True),),
        ),
    )
    assert dump_resource_input(value, RELATIONS_SPEC) == text("""
        $schema: https://opendatafabric.org/schemas/auth/v1alpha1/Relations
        headers:
          name: alice-bob
        spec:
          relations:
          - subject:
              type: Account
              name: alice
            relation: role
            value: maintainer
            object:
              account:
                name: bob
              type: Dataset
              name: bobs-dataset
          attributes:
          - object:
              account:
                name: bob
              type: Dataset
              name: bobs-dataset
            name: allowPublicRead
            value: true
        """)


CANONICAL = text("""
    $schema: https://opendatafabric.org/schemas/config/v1alpha1/SecretSet
    headers:
      id: aa-12345
      name: my-secret
      account:
        id: c27331ce-ce88-4ff9-8c5a-4ce8107cc03f
        did: did:odf:fed01816ef0a9abe93aba816ef0a9abe93aba90e6065747170300c0d3d30c2cd8d7a4
        name: sergiimk
      labels:
        nested:
          a: x
          b: y
        string: foo
      annotations:
        nested:
          a: x
          b: y
        string: foo
      generation: 1
      createdAt: 2026-01-01T00:00:00Z
      updatedAt: 2026-01-01T00:00:00Z
      deletedAt: 2026-01-01T00:00:00Z
    spec:
      secrets:
        tls:
          value: <cert>
    status:
      phase: Ready
      observedGeneration: 1
      reconciledAt: 2026-01-01T00:00:00Z
      conditions:
        https://opendatafabric.org/core/v1/Bool:
          value: true
        https://opendatafabric.org/core/v1/Nested:
          value:
            a: x
            b: y
        https://opendatafabric.org/core/v1/Str:
          lastTransitionTime: 2026-01-01T00:00:00Z
          observedGeneration: 1
          value: foo
    """)


def test_canonical() -> None:
    new_year = Timestamp.of(2026, 1, 1)
    entries: dict[str, JsonValue] = {"string": "foo", "nested": {"a": "x", "b": "y"}}
    expected = Resource(
        schema=SECRET_SET,
        headers=ResourceHeaders(
            id="aa-12345",
            name=ResourceName("my-secret"),
            account=AccountHandle(
                id="c27331ce-ce88-4ff9-8c5a-4ce8107cc03f",
                did=DatasetId(
                    bytes.fromhex(
                        "816ef0a9abe93aba816ef0a9abe93aba90e6065747170300c0d3d30c2cd8d7a4"
                    )
                ),
                name=AccountName("sergiimk"),
            ),
            labels=ResourceLabels(entries),
            annotations=ResourceAnnotations(entries),
            generation=1,
            created_at=new_year,
            updated_at=new_year,
            deleted_at=new_year,
        ),
        spec=SecretSetSpec(secrets=TLS),
        status=ResourceStatus(
            phase=ResourcePhase.READY,
            observed_generation=1,
            reconciled_at=new_year,
            conditions=ResourceConditions(
                {
                    "https://opendatafabric.org/core/v1/Str": {
                        "value": "foo",
                        "observedGeneration": 1,
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    },
                    "https://opendatafabric.org/core/v1/Bool": {"value": True},
                    "https://opendatafabric.org/core/v1/Nested": {"value": {"a": "x", "b": "y"}},
                }
            ),
        ),
    )
    value = load_resource(CANONICAL, model_spec("SecretSetSpec"))
    assert value == expected
    assert dump_resource(value, model_spec("SecretSetSpec")) == CANONICAL

    as_input = value.to_input(lambda spec: SecretSetSpecInput(secrets=spec.secrets))
    assert dump_resource_input(as_input, model_spec("SecretSetSpecInput")) == text("""
        $schema: https://opendatafabric.org/schemas/config/v1alpha1/SecretSet
        headers:
          id: aa-12345
          name: my-secret
          account:
            id: c27331ce-ce88-4ff9-8c5a-4ce8107cc03f
            did: did:odf:fed01816ef0a9abe93aba816ef0a9abe93aba90e6065747170300c0d3d30c2cd8d7a4
            name: sergiimk
          labels:
            nested:
              a: x
              b: y
            string: foo
          annotations:
            nested:
              a: x
              b: y
            string: foo
        spec:
          secrets:
            tls:
              value: <cert>
        """)


def test_json_form_reads_the_same() -> None:
    value = load_resource(CANONICAL, model_spec("SecretSetSpec"))
    as_json = json.dumps(write_resource(value, model_spec("SecretSetSpec")))
    assert load_resource(as_json, model_spec("SecretSetSpec")) == value


def test_keys_are_ordered_as_type_refs() -> None:
    """Schema URIs before short names, short names case-insensitively (the reference's BTreeMap)."""
    labels = ResourceLabels(
        {"zone": 1, "https://b.org/T": 2, "Beta": 3, "alpha": 4, "https://a.org/T": 5}
    )
    assert list(labels) == ["https://a.org/T", "https://b.org/T", "alpha", "Beta", "zone"]
    document = ResourceInput(
        schema=SECRET_SET,
        headers=ResourceHeadersInput(name=ResourceName("x"), labels=labels),
        spec={"b": 1, "a": {"d": 2, "c": 3}},
    )
    tree = write_resource_input(document)
    assert list(tree["headers"]["labels"]) == list(labels)
    assert json.dumps(tree["spec"]) == '{"a": {"c": 3, "d": 2}, "b": 1}'


@pytest.mark.parametrize(
    "short_form", ["Dataset:bob/bobs-dataset", "Dataset:bobs-dataset", "Account:alice"]
)
def test_ref_short_form_round_trips_to_long_form(short_form: str) -> None:
    ref = ResourceRef.parse(short_form)
    type_name, _, rest = short_form.partition(":")
    account, _, name = rest.rpartition("/")
    assert ref == ResourceRef(
        type=TypeRef(type_name),
        account=AccountRef(name=AccountName(account)) if account else None,
        name=ResourceName(name),
    )


def _input(headers: str, spec: str = "{}") -> str:
    return f"$schema: {SECRET_SET}\nheaders:\n{textwrap.indent(text(headers), '  ')}spec: {spec}\n"


RELATIONS_WITH = (
    "$schema: "
    + RELATIONS_SCHEMA
    + "\nheaders: {{name: r}}\nspec:\n  attributes:\n  - {{object: {ref}, name: n, value: 1}}\n"
)


@pytest.mark.parametrize(
    ("ref", "reason"),
    [
        ("Dataset", r"'Dataset' is not a resource reference: expected Type:name"),
        (
            "'Dataset:'",
            r"'Dataset:' is not a resource reference .*not a valid ResourceName: it is empty",
        ),
        ("Dataset:bob/", r"not a valid ResourceName: it is empty"),
        ("Dataset:a/b/c", r"'b/c' is not a valid ResourceName"),
        ("Data_set:x", r"'Data_set' is not a valid type reference"),
        ("'https://x.org/T:name'", r"'' is not a valid account name: it is empty"),
        ("'Dataset:b_ob/x'", r"'b_ob' is not a valid account name"),
    ],
)
def test_bad_ref_short_forms(ref: str, reason: str) -> None:
    with pytest.raises(
        ResourceError, match=r"^rel.yaml: spec\.attributes\[0\]\.object: .*" + reason
    ):
        load_resource_input(RELATIONS_WITH.format(ref=ref), RELATIONS_SPEC, "rel.yaml")


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (
            _input("name: x\nowner: alice\n"),
            r"^m.yaml: headers\.owner: unknown field `owner` of ResourceHeadersInput, expected one of `id`, `name`",
        ),
        (_input("id: 1\n"), r"^m.yaml: headers\.name: missing field `name`"),
        (
            _input("name: not_a_name\n"),
            r"^m.yaml: headers\.name: 'not_a_name' is not a valid ResourceName",
        ),
        (
            _input("name: x\naccount: {did: 'did:odf:fed01zz'}\n"),
            r"^m.yaml: headers\.account\.did: 'did:odf:fed01zz'",
        ),
        (
            _input("name: x\naccount: {did: 'did:key:z6Mkf'}\n"),
            r"^m.yaml: headers\.account\.did: 'did:key:z6Mkf'",
        ),
        (
            _input(
                "name: x\naccount: {did: 'did:pkh:eip155:1:0xab16a96D359eC26a11e2C2b3d8f8B8942d5Bfcdb'}\n"
            ),
            r"^m.yaml: headers\.account\.did: .*did:pkh \(wallet\) accounts are not supported",
        ),
        (
            _input("name: x\naccount: {name: a, email: a@b.c}\n"),
            r"^m.yaml: headers\.account\.email: unknown field",
        ),
        (
            _input("name: x\naccount: 'sergii mk'\n"),
            r"^m.yaml: headers\.account: 'sergii mk' is not a valid account name",
        ),
        (
            _input("name: x\nlabels: {'app/name': x}\n"),
            r"^m.yaml: headers\.labels: 'app/name' is not a valid type reference",
        ),
        (
            _input("name: x\nlabels: {Team: a, team: b}\n"),
            r"^m.yaml: headers\.labels: keys 'Team' and 'team' name the same",
        ),
        (
            _input("name: x\n") + "kind: Thing\n",
            r"^m.yaml: kind: unknown field `kind` of ResourceInput",
        ),
        (f"$schema: {SECRET_SET}\nheaders: {{name: x}}\n", r"^m.yaml: spec: missing field `spec`"),
    ],
)
def test_invalid_input_names_the_field(document: str, message: str) -> None:
    with pytest.raises(ResourceError, match=message):
        load_resource_input(document, GENERIC_SPEC, "m.yaml")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("phase: Ready", "phase: Done"), r"status\.phase: unknown ResourcePhase 'Done'"),
        (("generation: 1", "generation: -1"), r"headers\.generation: integer -1 is out of range"),
        (
            ("generation: 1", "generation: '1'"),
            r"headers\.generation: expected an integer, got string '1'",
        ),
        (("    name: sergiimk\n", ""), r"headers\.account\.name: missing field `name`"),
        (
            ("  createdAt: 2026-01-01T00:00:00Z", "  createdAt: 2026-13-01T00:00:00Z"),
            r"headers\.createdAt: invalid date 2026-13-01",
        ),
        (
            ("  labels:\n    nested:\n      a: x\n      b: y\n    string: foo\n", ""),
            r"headers\.labels: missing field `labels`",
        ),
    ],
)
def test_canonical_form_errors(change: tuple[str, str], message: str) -> None:
    document = CANONICAL.replace(*change, 1)
    assert document != CANONICAL
    with pytest.raises(ResourceError, match="^c.yaml: " + message):
        load_resource(document, model_spec("SecretSetSpec"), "c.yaml")


def test_canonical_form_optional_fields_and_phase_aliases() -> None:
    """``deletedAt`` is optional; phases also read in lowercase (the reference's serde aliases)."""
    without_deletion = CANONICAL.replace("  deletedAt: 2026-01-01T00:00:00Z\n", "")
    value = load_resource(
        without_deletion.replace("phase: Ready", "phase: ready"), model_spec("SecretSetSpec")
    )
    assert value.headers.deleted_at is None and value.status.phase is ResourcePhase.READY
    assert dump_resource(value, model_spec("SecretSetSpec")) == without_deletion


def test_typed_spec_errors_carry_the_path() -> None:
    with pytest.raises(ResourceError, match=r"^spec\.secrets\.tls\.contentEncodin: unknown field"):
        read_resource_input(
            {
                "$schema": SECRET_SET,
                "headers": {"name": "x"},
                "spec": {"secrets": {"tls": {"value": "v", "contentEncodin": "jwe"}}},
            },
            model_spec("SecretSetSpecInput"),
        )


def test_generated_resources_embed_the_typed_envelope() -> None:
    """One model: the generated resource types (``Dataset``, ``SecretSet``, …) hold the same typed
    headers, references and names as ``protocol.resource`` (no string-typed copies)."""
    import protocol.model as model
    import protocol.resource as resource

    for name in (
        "AccountHandle",
        "AccountRef",
        "Resource",
        "ResourceHeaders",
        "ResourceHeadersInput",
        "ResourceInput",
        "ResourceLabels",
        "ResourceRef",
        "ResourceStatus",
        "AttributeInput",
        "RelationInput",
    ):
        assert getattr(model, name) is getattr(resource, name), name

    dataset = yaml_codec.loads(
        text("""
        $schema: https://opendatafabric.org/schemas/dataset/v1alpha1/Dataset
        headers:
          name: My-Dataset
          account: bob
          labels: {Team: data, https://a.org/T: 1}
        spec:
          kind: Root
          metadata: []
          volume: {account: alice, name: fast-disk}
        """),
        "Dataset",
    )
    assert dataset.headers == ResourceHeadersInput(
        name=ResourceName("my-dataset"),
        account=AccountRef(name=AccountName("bob")),
        labels=ResourceLabels({"Team": "data", "https://a.org/T": 1}),
    )
    assert str(dataset.headers.name) == "My-Dataset"
    assert list(dataset.headers.labels) == ["https://a.org/T", "Team"]
    assert dataset.spec.volume.account == AccountRef(name=AccountName("alice"))
    assert dataset.spec.volume.name == ResourceName("Fast-Disk")

    value_ref = yaml_codec.loads("{type: SecretSet, name: creds, path: tls}", "ValueRef")
    assert value_ref.type == TypeRef("secretset") and value_ref.name == ResourceName("creds")
    with pytest.raises(DecodeError, match=r"^v.yaml: name: 'a b' is not a valid ResourceName"):
        yaml_codec.loads("{type: SecretSet, name: 'a b'}", "ValueRef", "v.yaml")
    with pytest.raises(
        DecodeError, match=r"^v.yaml: headers\.labels: keys 'Team' and 'team' name the same"
    ):
        yaml_codec.loads(
            "{$schema: x, headers: {name: a, labels: {Team: 1, team: 2}}, spec: {secrets: {}}}",
            "SecretSet",
            "v.yaml",
        )
