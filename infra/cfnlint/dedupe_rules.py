"""cfn-lint rules for templates that deploy dedupe (github.com/lambda-dedupe/dedupe).

Load them with `cfn-lint --append-rules infra/cfnlint` (make validate and
infra.Lint do). They read the template after cfn-lint's own SAM transform,
so they see plain CloudFormation: tables, functions, roles and URLs.

An idempotency table is a DynamoDB table that a function's environment
variable IDEMPOTENCY_TABLE refers to (Ref), or that has the reaper's
`inflight` index. A guarded function is a function whose environment refers
to an idempotency table. A reaper is a guarded function with REAPER_SHARDS
in its environment.

E9101  an idempotency table has TTL enabled on expires_at
E9102  a guarded function's role grants what the guard needs (GetItem,
       PutItem, UpdateItem on the table); a reaper's grants Query on the
       table's inflight index and UpdateItem on the table
E9103  a guarded function is not behind a Function URL with AuthType NONE
       (every caller would be anonymous: keys could not be scoped by caller)
"""

import fnmatch
import json

from cfnlint.rules import CloudFormationLintRule, RuleMatch

SOURCE = "https://github.com/lambda-dedupe/dedupe/blob/main/docs/deploying.md#your-own-stack"


def _resources(cfn):
    res = cfn.template.get("Resources", {})
    return res if isinstance(res, dict) else {}


def _of_type(cfn, typ):
    return {k: v for k, v in _resources(cfn).items() if isinstance(v, dict) and v.get("Type") == typ}


def _props(res):
    p = res.get("Properties", {})
    return p if isinstance(p, dict) else {}


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


def idempotency_tables(cfn):
    tables = _of_type(cfn, "AWS::DynamoDB::Table")
    out = set()
    for name, t in tables.items():
        for gsi in _props(t).get("GlobalSecondaryIndexes", []) or []:
            if isinstance(gsi, dict) and gsi.get("IndexName") == "inflight":
                out.add(name)
    for fn in _of_type(cfn, "AWS::Lambda::Function").values():
        target = _ref_target(_env(fn).get("IDEMPOTENCY_TABLE"))
        if target in tables:
            out.add(target)
    return out


def guarded_functions(cfn):
    """Function logical id -> the idempotency tables its environment names."""
    tables = idempotency_tables(cfn)
    out = {}
    for name, fn in _of_type(cfn, "AWS::Lambda::Function").items():
        named = {_ref_target(v) for v in _env(fn).values()} & tables
        if named:
            out[name] = named
    return out


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
                    f"dedupe: idempotency table {name} needs TimeToLiveSpecification {{AttributeName: expires_at, Enabled: true}}"))
        return matches


def _statements(cfn, fn):
    """The Allow statements of the inline policies of fn's role (and of
    AWS::IAM::Policy resources attached to it)."""
    role = _ref_target(_props(fn).get("Role"))
    out = []
    if role is None:
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


def _grants(stmts, action, table, index=False):
    for s in stmts:
        actions = [a for a in _as_list(s.get("Action", [])) if isinstance(a, str)]
        if not any(fnmatch.fnmatch(action.lower(), a.lower()) for a in actions):
            continue
        for res in _as_list(s.get("Resource", [])):
            if res == "*":
                return True
            text = json.dumps(res)
            names_table = (f'"{table}"' in text or "${" + table + ".Arn}" in text or "${" + table + "}" in text)
            if not names_table:
                continue
            if not index:
                if "/index/" not in text:
                    return True
            elif "index/inflight" in text or "index/*" in text:
                return True
    return False


class GuardGrants(CloudFormationLintRule):
    id = "E9102"
    shortdesc = "dedupe: grants of the guard and the reaper"
    description = ("A guarded function's role allows dynamodb:GetItem, PutItem and UpdateItem on its idempotency table; "
                   "a reaper's allows dynamodb:Query on the table's inflight index and UpdateItem on the table.")
    source_url = SOURCE
    tags = ["dedupe", "iam"]

    def match(self, cfn):
        matches = []
        fns = _of_type(cfn, "AWS::Lambda::Function")
        for name, tables in sorted(guarded_functions(cfn).items()):
            stmts, has_role = _statements(cfn, fns[name])
            if not has_role:
                continue  # a role from outside the template: nothing to check
            reaper = "REAPER_SHARDS" in _env(fns[name])
            for table in sorted(tables):
                need = [("dynamodb:Query", True), ("dynamodb:UpdateItem", False)] if reaper else \
                    [("dynamodb:GetItem", False), ("dynamodb:PutItem", False), ("dynamodb:UpdateItem", False)]
                missing = [a + (" on index inflight" if idx else "") for a, idx in need if not _grants(stmts, a, table, idx)]
                if missing:
                    who = "reaper" if reaper else "guarded function"
                    matches.append(RuleMatch(["Resources", name, "Properties", "Role"],
                        f"dedupe: {who} {name} is not allowed {', '.join(missing)} on idempotency table {table}"))
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
                matches.append(RuleMatch(["Resources", name, "Properties", "AuthType"],
                    f"dedupe: guarded function {target} is behind Function URL {name} with AuthType NONE: every caller is anonymous; use AWS_IAM"))
        return matches
