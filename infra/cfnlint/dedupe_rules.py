"""cfn-lint rules for templates that deploy dedupe (github.com/lambda-dedupe/dedupe).

Load them with `cfn-lint --append-rules infra/cfnlint` (make validate and
infra.Lint do). They read the template after cfn-lint's own SAM transform,
so they see plain CloudFormation: tables, functions, roles and URLs.

A guarded function is a function whose environment sets IDEMPOTENCY_TABLE;
a reaper is one that also sets REAPER_SHARDS; LARGE_RESPONSE_BUCKET (the
demo's variable for dynamostore.Options.LargeResults) names the bucket of
large responses. An idempotency table is a table of the template that a
function's IDEMPOTENCY_TABLE refers to, or that has the reaper's `inflight`
index. What each role needs comes from permissions.json beside this file:
the calls the code makes, recorded by a test (infra/internal/permtest), the
one source the docs and the shipped policies' tests read too.

E9101  an idempotency table has TTL enabled on expires_at
E9102  a guarded function's role allows what the guard calls; a reaper's
       what the reaper calls
E9103  a guarded function is not behind a Function URL with AuthType NONE
E9104  a guarded function's (or reaper's) role allows DescribeTable, which
       dynamostore.New calls unless GlobalTables is GlobalTablesUnchecked
W9105  an idempotency table is keyed by reference (HASH ref, RANGE pk) or
       has the ref index (dedupe show key:...)
E9106  a function with LARGE_RESPONSE_BUCKET may write and read the objects
W9107  a role allows no more on dedupe's table, indexes and objects than
       dedupe calls (a DynamoDBCrudPolicy, a wildcard)
E9108  an SQS, Kinesis or DynamoDB Streams source of a guarded function
       reports batch item failures (FunctionResponseTypes)
E9109  the table of a reaper has the inflight index

Each finding names the fix. A finding you accept is waived like any
cfn-lint finding, with its reason (Metadata.cfn-lint on the resource, or
.cfnlintrc.yaml).
"""

import fnmatch
import json
import os

from cfnlint.rules import CloudFormationLintRule, RuleMatch

SOURCE = "https://github.com/lambda-dedupe/dedupe/blob/main/docs/deploying.md#checking-your-template"

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "permissions.json")) as _f:
    PERMISSIONS = json.load(_f)

_PARTS = {p["name"]: p for p in PERMISSIONS["parts"]}
_ROLES = {r["name"]: r for r in PERMISSIONS["roles"]}

OBJECTS = "bucket/"  # infra.OnObjectsPrefix
INDEX = "index/"     # infra.OnIndexPrefix


def _resources(cfn):
    res = cfn.template.get("Resources", {})
    return res if isinstance(res, dict) else {}


def _of_type(cfn, typ):
    return {k: v for k, v in _resources(cfn).items() if isinstance(v, dict) and v.get("Type") == typ}


def _props(res):
    p = res.get("Properties", {})
    return p if isinstance(p, dict) else {}


def _conditions(v, out=None):
    """The names of the conditions the Fn::Ifs in v test."""
    out = set() if out is None else out
    if isinstance(v, dict):
        f = v.get("Fn::If")
        if isinstance(f, list) and len(f) == 3 and isinstance(f[0], str):
            out.add(f[0])
        for x in v.values():
            _conditions(x, out)
    elif isinstance(v, list):
        for x in v:
            _conditions(x, out)
    return out


def _resolve(v, values):
    """v with each Fn::If replaced by the branch values (condition name to
    bool) selects."""
    if isinstance(v, dict):
        f = v.get("Fn::If")
        if len(v) == 1 and isinstance(f, list) and len(f) == 3 and f[0] in values:
            return _resolve(f[1] if values[f[0]] else f[2], values)
        return {k: _resolve(x, values) for k, x in v.items()}
    if isinstance(v, list):
        return [_resolve(x, values) for x in v]
    return v


def _variants(props):
    """props resolved once for each assignment of the conditions its
    Fn::Ifs test (a table whose key schema or indexes a parameter
    selects): every one a stack may deploy."""
    names = sorted(_conditions(props))[:6]
    out = []
    for i in range(1 << len(names)):
        values = {n: bool(i >> k & 1) for k, n in enumerate(names)}
        r = _resolve(props, values)
        out.append(r if isinstance(r, dict) else {})
    return out


def _gsis(props):
    g = props.get("GlobalSecondaryIndexes", []) or []
    return [x for x in g if isinstance(x, dict)] if isinstance(g, list) else []


def _keyed_by_ref(props):
    """Whether the table is keyed by reference (HASH ref, RANGE pk)."""
    ks = props.get("KeySchema", [])
    if not isinstance(ks, list):
        return False
    keys = {k.get("KeyType"): k.get("AttributeName") for k in ks if isinstance(k, dict)}
    return len(ks) == 2 and keys.get("HASH") == "ref" and keys.get("RANGE") == "pk"


def _ref_target(v):
    """The logical id v refers to with Ref or Fn::GetAtt, else None."""
    if isinstance(v, dict):
        if isinstance(v.get("Ref"), str):
            return v["Ref"]
        ga = v.get("Fn::GetAtt")
        if isinstance(ga, list) and ga and isinstance(ga[0], str):
            return ga[0]
        if isinstance(ga, str):
            return ga.split(".")[0]
    return None


def _env(fn):
    env = _props(fn).get("Environment", {})
    variables = env.get("Variables", {}) if isinstance(env, dict) else {}
    return variables if isinstance(variables, dict) else {}


def _tokens(v):
    """What names a resource in a value: logical ids and parameters it
    refers to (each branch of an Fn::If), or a literal name. Each is
    ("id", name) or ("literal", name)."""
    if isinstance(v, str):
        return {("literal", v)} if v else set()
    if isinstance(v, dict):
        target = _ref_target(v)
        if target is not None:
            return {("id", target)}
        if "Fn::If" in v and isinstance(v["Fn::If"], list) and len(v["Fn::If"]) == 3:
            return _tokens(v["Fn::If"][1]) | _tokens(v["Fn::If"][2])
    return set()


def _mentions(text, token):
    kind, name = token
    if kind == "literal":
        return ("table/" + name + '"') in text or ("table/" + name + "/") in text or (":::" + name + "/") in text
    return ('"' + name + '"') in text or ("${" + name + "}") in text or ("${" + name + ".") in text or ('"' + name + ".") in text


def idempotency_tables(cfn):
    tables = _of_type(cfn, "AWS::DynamoDB::Table")
    out = set()
    for name, t in tables.items():
        for variant in _variants(_props(t)):
            for gsi in _gsis(variant):
                if gsi.get("IndexName") == "inflight":
                    out.add(name)
    for fn in _of_type(cfn, "AWS::Lambda::Function").values():
        for kind, name in _tokens(_env(fn).get("IDEMPOTENCY_TABLE")):
            if kind == "id" and name in tables:
                out.add(name)
    return out


def guarded_functions(cfn):
    """Function logical id -> the tokens of its idempotency table."""
    out = {}
    for name, fn in _of_type(cfn, "AWS::Lambda::Function").items():
        env = _env(fn)
        if "IDEMPOTENCY_TABLE" in env:
            out[name] = _tokens(env["IDEMPOTENCY_TABLE"])
    return out


def roles_of(fn):
    """The roles of permissions.json the function plays (infra.FunctionRoles)."""
    env = _env(fn)
    if "IDEMPOTENCY_TABLE" not in env:
        return []
    roles = ["reaper"] if "REAPER_SHARDS" in env else ["guarded function"]
    if "LARGE_RESPONSE_BUCKET" in env:
        roles.append("large responses")
    return roles


def needs(roles):
    """(rule, action, on) of every grant the roles need."""
    out = []
    for r in roles:
        for pn in _ROLES[r]["parts"]:
            p = _PARTS[pn]
            for g in p["grants"]:
                action, on = g.split(" on ", 1)
                out.append((p.get("rule", ""), action, on))
    return out


def _statements(cfn, fn):
    """The Allow statements of the inline policies of fn's role (and of
    AWS::IAM::Policy resources attached to it), and whether the role is in
    the template."""
    role = _ref_target(_props(fn).get("Role"))
    out = []
    if role is None or role not in _resources(cfn):
        return out, False
    docs = []
    r = _resources(cfn).get(role, {})
    for p in _props(r).get("Policies", []) or []:
        if isinstance(p, dict):
            docs.append(p.get("PolicyDocument"))
    for pol in _of_type(cfn, "AWS::IAM::Policy").values():
        roles = _props(pol).get("Roles", []) or []
        if any(_ref_target(x) == role for x in roles):
            docs.append(_props(pol).get("PolicyDocument"))
    for d in docs:
        stmts = d.get("Statement", []) if isinstance(d, dict) else []
        if isinstance(stmts, dict):
            stmts = [stmts]
        for s in stmts:
            if isinstance(s, dict) and s.get("Effect") == "Allow":
                out.append(s)
    return out, True


def _as_list(v):
    return v if isinstance(v, list) else [v]


def _kind(text):
    """What a resource element names: "table", "index/<name>" ("index/*"),
    or "bucket/<prefix>*" for objects."""
    if "/index/" in text:
        rest = text.split("/index/", 1)[1]
        name = rest.split('"', 1)[0].split("/", 1)[0]
        return INDEX + name
    if ":::" in text or ".Arn}/" in text:
        rest = text.split(":::", 1)[1] if ":::" in text else text
        if "}/" in rest:
            obj = rest.split("}/", 1)[1]
        elif "/" in rest:
            obj = rest.split("/", 1)[1]
        else:
            return "bucket"
        return OBJECTS + obj.split('"', 1)[0]
    return "table"


def _covers(kind, on):
    """Whether a resource element of kind kind covers the grant's on."""
    if kind == on:
        return True
    if kind.startswith(INDEX) and on.startswith(INDEX):
        return fnmatch.fnmatchcase(on, kind)
    if kind.startswith(OBJECTS) and on.startswith(OBJECTS):
        return fnmatch.fnmatchcase(on, kind) or kind == OBJECTS + "*"
    return False


def _grants(stmts, action, on, token):
    for s in stmts:
        actions = [a for a in _as_list(s.get("Action", [])) if isinstance(a, str)]
        if not any(fnmatch.fnmatch(action.lower(), a.lower()) for a in actions):
            continue
        for res in _as_list(s.get("Resource", [])):
            if res == "*":
                return True
            text = json.dumps(res)
            if _mentions(text, token) and _covers(_kind(text), on):
                return True
    return False


def _bucket_tokens(fn):
    return _tokens(_env(fn).get("LARGE_RESPONSE_BUCKET"))


def _token_name(token):
    return token[1]


def _fn_path(name):
    return ["Resources", name, "Properties", "Role"]


def _missing(cfn, rule_ids):
    """(function, table names, [(action, on)]) for every guarded function
    whose role lacks grants of the parts checked by rule_ids. The tokens
    of one table (the branches of an Fn::If) that lack the same grants
    are one finding."""
    fns = _of_type(cfn, "AWS::Lambda::Function")
    out = []
    for name, tokens in sorted(guarded_functions(cfn).items()):
        stmts, has_role = _statements(cfn, fns[name])
        if not has_role:
            continue  # a role from outside the template: nothing to check
        need = [(a, on) for rule, a, on in needs(roles_of(fns[name])) if rule in rule_ids]
        for wanted, toks in ((lambda on: not on.startswith(OBJECTS), tokens), (lambda on: on.startswith(OBJECTS), _bucket_tokens(fns[name]))):
            by_missing = {}
            for token in sorted(toks):
                missing = tuple((a, on) for a, on in need if wanted(on) and not _grants(stmts, a, on, token))
                if missing:
                    by_missing.setdefault(missing, []).append(_token_name(token))
            for missing, names in by_missing.items():
                out.append((name, " or ".join(names), list(missing)))
    return out


def _where(name, target, path):
    """Where to report a finding on resource name that concerns function
    target: SAM names what it generates for a function's Events or
    FunctionUrlConfig after the function (FnOrders, FnUrl), resources
    with no line of their own in the template, so the function's is given."""
    if name != target and name.startswith(target):
        return ["Resources", target, "Properties"]
    return ["Resources", name] + path


def _describe(missing):
    return ", ".join(a + (" on " + on if on != "table" else "") for a, on in missing)


class IdempotencyTableTTL(CloudFormationLintRule):
    id = "E9101"
    shortdesc = "dedupe: TTL on expires_at"
    description = "An idempotency table has TimeToLiveSpecification enabled on expires_at, so expired records are deleted."
    source_url = SOURCE
    tags = ["dedupe", "dynamodb"]

    def match(self, cfn):
        matches = []
        tables = _of_type(cfn, "AWS::DynamoDB::Table")
        for name in sorted(idempotency_tables(cfn)):
            ttl = _props(tables[name]).get("TimeToLiveSpecification")
            ok = isinstance(ttl, dict) and ttl.get("AttributeName") == "expires_at" and ttl.get("Enabled") in (True, "true", "True")
            if not ok:
                matches.append(RuleMatch(["Resources", name, "Properties"],
                    f"dedupe: idempotency table {name} has no TTL on expires_at; fix: add TimeToLiveSpecification {{AttributeName: expires_at, Enabled: true}}"))
        return matches


class GuardGrants(CloudFormationLintRule):
    id = "E9102"
    shortdesc = "dedupe: grants of the guard and the reaper"
    description = ("A guarded function's role allows what the guard calls on its idempotency table, a reaper's what the reaper calls "
                   "(permissions.json: recorded from the code).")
    source_url = SOURCE
    tags = ["dedupe", "iam"]

    def match(self, cfn):
        matches = []
        fns = _of_type(cfn, "AWS::Lambda::Function")
        for name, token, missing in _missing(cfn, {"E9102"}):
            who = "reaper" if "REAPER_SHARDS" in _env(fns[name]) else "guarded function"
            matches.append(RuleMatch(_fn_path(name),
                f"dedupe: {who} {name} may not {_describe(missing)} on idempotency table {token}; "
                f"fix: allow them in its Policies (docs/deploying.md, what each role needs)"))
        return matches


class PublicFunctionURL(CloudFormationLintRule):
    id = "E9103"
    shortdesc = "dedupe: guarded function behind a public Function URL"
    description = ("A guarded function behind a Function URL with AuthType NONE has anonymous callers only: "
                   "keys cannot be scoped by caller. Use AuthType AWS_IAM, or put API Gateway with an authorizer in front.")
    source_url = SOURCE
    tags = ["dedupe", "lambda"]

    def match(self, cfn):
        matches = []
        guarded = guarded_functions(cfn)
        for name, url in sorted(_of_type(cfn, "AWS::Lambda::Url").items()):
            p = _props(url)
            if p.get("AuthType") != "NONE":
                continue
            target = _ref_target(p.get("TargetFunctionArn"))
            if target in guarded:
                matches.append(RuleMatch(_where(name, target, ["Properties", "AuthType"]),
                    f"dedupe: guarded function {target} is behind Function URL {name} with AuthType NONE: every caller is anonymous; fix: AuthType AWS_IAM"))
        return matches


class GlobalTableCheck(CloudFormationLintRule):
    id = "E9104"
    shortdesc = "dedupe: DescribeTable for the global-table check"
    description = ("dynamostore.New calls DescribeTable once per cold start, unless Options.GlobalTables is GlobalTablesUnchecked: "
                   "without the grant the function fails its init with AccessDenied.")
    source_url = SOURCE
    tags = ["dedupe", "iam"]

    def match(self, cfn):
        matches = []
        for name, token, missing in _missing(cfn, {"E9104"}):
            matches.append(RuleMatch(_fn_path(name),
                f"dedupe: {name} may not {_describe(missing)} on idempotency table {token}, which dynamostore.New calls: "
                f"its init fails with AccessDenied; fix: allow it, or, if the function's store is built with "
                f"GlobalTables: dynamostore.GlobalTablesUnchecked, waive E9104 on the function with that reason"))
        return matches


class RefIndex(CloudFormationLintRule):
    id = "W9105"
    shortdesc = "dedupe: the ref index"
    description = ("An idempotency table is keyed by reference (HASH ref, RANGE pk), or, classic (HASH pk), has the "
                   "KEYS_ONLY index ref (partition key ref, S): how `dedupe show key:...`, release and forget find a "
                   "record from a log line's key reference.")
    source_url = SOURCE
    tags = ["dedupe", "dynamodb"]

    def match(self, cfn):
        matches = []
        tables = _of_type(cfn, "AWS::DynamoDB::Table")
        for name in sorted(idempotency_tables(cfn)):
            ok = True
            for p in _variants(_props(tables[name])):
                found = _keyed_by_ref(p)
                for gsi in _gsis(p):
                    if gsi.get("IndexName") != "ref":
                        continue
                    ks = gsi.get("KeySchema", [])
                    found = found or (isinstance(ks, list) and len(ks) == 1 and isinstance(ks[0], dict) and ks[0].get("AttributeName") == "ref")
                ok = ok and found
            if not ok:
                matches.append(RuleMatch(["Resources", name, "Properties"],
                    f"dedupe: idempotency table {name} is neither keyed by reference nor has the index ref: the runbook's "
                    f"`dedupe show key:...` fails on it; fix: key a new table by reference (HASH ref S, RANGE pk S: "
                    f"dynamostore.TableInput), or add to a classic one the global secondary index ref (HASH ref, S; "
                    f"Projection KEYS_ONLY) and the attribute definition ref S"))
        return matches


class LargeResponseGrants(CloudFormationLintRule):
    id = "E9106"
    shortdesc = "dedupe: grants of large responses"
    description = ("A function with LARGE_RESPONSE_BUCKET (dynamostore.Options.LargeResults) may write and read "
                   "the objects under the store's prefix, dedupe/.")
    source_url = SOURCE
    tags = ["dedupe", "iam", "s3"]

    def match(self, cfn):
        matches = []
        for name, token, missing in _missing(cfn, {"E9106"}):
            matches.append(RuleMatch(_fn_path(name),
                f"dedupe: {name} stores large responses in {token} but may not {_describe(missing)}: "
                f"every large response would fail to be recorded; fix: allow s3:PutObject and s3:GetObject on the bucket's dedupe/* objects"))
        return matches


def res_star(s):
    """Whether a statement allows its actions on every resource."""
    return "*" in _as_list(s.get("Resource", []))


def _by_kind(grants):
    """"a on k" strings, grouped: "on the table: a, b; on index/*: c"."""
    kinds = {}
    for g in grants:
        a, on = g.split(" on ", 1)
        kinds.setdefault(on, []).append(a)
    return "; ".join(f"on {'the table' if on == 'table' else on}: {', '.join(sorted(set(acts)))}" for on, acts in sorted(kinds.items()))


class BroadGrants(CloudFormationLintRule):
    id = "W9107"
    shortdesc = "dedupe: grants beyond what dedupe calls"
    description = ("A role allows on dedupe's table, indexes or objects more than dedupe calls there "
                   "(a SAM DynamoDBCrudPolicy, a wildcard action, objects outside dedupe/).")
    source_url = SOURCE
    tags = ["dedupe", "iam"]

    def match(self, cfn):
        matches = []
        fns = _of_type(cfn, "AWS::Lambda::Function")
        for name, tokens in sorted(guarded_functions(cfn).items()):
            stmts, has_role = _statements(cfn, fns[name])
            if not has_role:
                continue
            need = needs(roles_of(fns[name]))
            allowed = {(a.lower(), on) for _, a, on in need}
            all_tokens = set(tokens) | _bucket_tokens(fns[name])
            extra = []
            for s in stmts:
                actions = [a for a in _as_list(s.get("Action", [])) if isinstance(a, str)]
                for res in _as_list(s.get("Resource", [])):
                    text = json.dumps(res)
                    if not any(_mentions(text, t) for t in all_tokens):
                        continue
                    kind = _kind(text)
                    for a in actions:
                        if a.startswith("s3:") != kind.startswith(OBJECTS) and not ("*" in a):
                            continue  # an S3 action on a table, or the other way round: IAM ignores it
                        if "*" in a or "?" in a or (a.lower(), kind) not in allowed:
                            extra.append(f"{a} on {kind}")
                if res_star(s):
                    for a in actions:
                        if a == "*" or a.startswith(("dynamodb:", "s3:")) and ("*" in a or a.lower() not in {x for x, _ in allowed}):
                            extra.append(f"{a} on *")
            if extra:
                matches.append(RuleMatch(_fn_path(name),
                    f"dedupe: {name}'s role allows what dedupe never calls ({_by_kind(extra)}; a SAM DynamoDBCrudPolicy or a wildcard grants such); "
                    f"fix: allow exactly {_by_kind(sorted({f'{a} on {on}' for _, a, on in need}))}"))
        return matches


class BatchItemFailures(CloudFormationLintRule):
    id = "E9108"
    shortdesc = "dedupe: batch item failures reported"
    description = ("An SQS, Kinesis or DynamoDB Streams source of a guarded function has FunctionResponseTypes "
                   "[ReportBatchItemFailures]. Without it Lambda ignores a partial batch response: a handler that returns one "
                   "(the batch adapters with ReportBatchItemFailures set) loses its failed messages.")
    source_url = "https://github.com/lambda-dedupe/dedupe/blob/main/docs/functions.md#batches-failed-items-and-reportbatchitemfailures"
    tags = ["dedupe", "lambda"]

    # Sources that have no partial batch responses at all.
    _OTHER = ("Topics", "Queues", "SelfManagedEventSource", "AmazonManagedKafkaEventSourceConfig",
              "SelfManagedKafkaEventSourceConfig", "DocumentDBEventSourceConfig")

    def match(self, cfn):
        matches = []
        guarded = guarded_functions(cfn)
        for name, esm in sorted(_of_type(cfn, "AWS::Lambda::EventSourceMapping").items()):
            p = _props(esm)
            target = _ref_target(p.get("FunctionName"))
            if target not in guarded or any(k in p for k in self._OTHER):
                continue
            types = p.get("FunctionResponseTypes") or []
            if "ReportBatchItemFailures" not in _as_list(types):
                matches.append(RuleMatch(_where(name, target, ["Properties"]),
                    f"dedupe: event source {name} of guarded function {target} does not report batch item failures: "
                    f"a partial batch response is ignored and its failed messages are lost; fix: add "
                    f"FunctionResponseTypes: [ReportBatchItemFailures] to the event, and set ReportBatchItemFailures in the "
                    f"adapter's config (SQSConfig, KinesisConfig, DynamoDBConfig), or waive E9108 if the handler keeps "
                    f"the adapter's default, which fails the whole batch"))
        return matches


class ReaperIndex(CloudFormationLintRule):
    id = "E9109"
    shortdesc = "dedupe: the reaper's index"
    description = "The idempotency table of a reaper has the sparse index inflight (HASH inflight_shard, RANGE lease_expires_at), which every reap run queries, projecting long_key on a table keyed by reference."
    source_url = SOURCE
    tags = ["dedupe", "dynamodb"]

    def match(self, cfn):
        matches = []
        tables = _of_type(cfn, "AWS::DynamoDB::Table")
        fns = _of_type(cfn, "AWS::Lambda::Function")
        for name, tokens in sorted(guarded_functions(cfn).items()):
            if "REAPER_SHARDS" not in _env(fns[name]):
                continue
            for kind, table in sorted(tokens):
                if kind != "id" or table not in tables:
                    continue
                variants = _variants(_props(tables[table]))
                if not all(any(g.get("IndexName") == "inflight" for g in _gsis(v)) for v in variants):
                    matches.append(RuleMatch(["Resources", table, "Properties"],
                        f"dedupe: reaper {name} queries the index inflight of {table}, which has none: every run fails; "
                        f"fix: add the global secondary index inflight (HASH inflight_shard N, RANGE lease_expires_at N, "
                        f"INCLUDE owner, status, created_at, and long_key on a table keyed by reference)"))
                elif any(_keyed_by_ref(v) and not _projects(g, "long_key")
                         for v in variants for g in _gsis(v) if g.get("IndexName") == "inflight"):
                    matches.append(RuleMatch(["Resources", table, "Properties"],
                        f"dedupe: reaper {name} reads the full key of a key too long for the sort key of {table} (keyed by "
                        f"reference) from its index inflight, which does not project long_key: such a stranded record fails "
                        f"every run (the reaper may not GetItem); fix: add long_key to the index's NonKeyAttributes"))
        return matches


def _projects(gsi, attr):
    """Whether the index gsi projects the non-key attribute attr."""
    p = gsi.get("Projection", {})
    if not isinstance(p, dict):
        return False
    if p.get("ProjectionType") == "ALL":
        return True
    attrs = p.get("NonKeyAttributes", [])
    return p.get("ProjectionType") == "INCLUDE" and isinstance(attrs, list) and attr in attrs
