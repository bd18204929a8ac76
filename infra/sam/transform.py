#!/usr/bin/env python3
"""Apply the AWS SAM transform to a template offline and print the result.

This is what `sam build`/`sam deploy` (and CloudFormation's
AWS::Serverless-2016-10-31 transform) turn template.yaml into, computed by
aws-sam-translator, the library they use, without any AWS call:

  * the managed-policy map that the translator would fetch from IAM is
    empty (the template names no managed policy by name; the ones SAM adds
    itself, AWSLambdaBasicExecutionRole and AWSXrayWriteOnlyAccess, are
    ARNs it builds without IAM);
  * the region, for the ARNs SAM builds, is --region (default us-east-1).

Usage:
  transform.py [--region R] [--code LogicalId=s3://bucket/key ...]
               [--parameter Name=Value ...] TEMPLATE

--code replaces a function's CodeUri with an S3 location, as `sam package`
does after uploading the built artifact. A function whose CodeUri is still
a local path and that --code does not name gets the placeholder
s3://sam-artifacts-offline/<LogicalId>.zip (the translator accepts only S3
locations; cfn-lint substitutes placeholders the same way). The transformed template is
printed to standard output as JSON. Needs aws-sam-translator and cfn-lint
(for its YAML loader, which understands the short intrinsic forms such as
!Ref): pip install aws-sam-translator cfn-lint.
"""

import argparse
import json
import os
import sys


def parse_pairs(pairs, what):
    out = {}
    for p in pairs:
        name, sep, value = p.partition("=")
        if not sep or not name:
            sys.exit(f"transform.py: {what} {p!r}: want Name=Value")
        out[name] = value
    return out


class NoManagedPolicies:
    """A ManagedPolicyLoader that never calls IAM."""

    def load(self):
        return {}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("template")
    ap.add_argument("--region", default="us-east-1")
    ap.add_argument("--code", action="append", default=[], metavar="LogicalId=s3://bucket/key")
    ap.add_argument("--parameter", action="append", default=[], metavar="Name=Value")
    args = ap.parse_args()

    # The translator reads the region from boto's session for the pseudo
    # parameters it fills in; pin it so that nothing is looked up.
    os.environ["AWS_DEFAULT_REGION"] = args.region
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "offline")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "offline")

    from cfnlint.decode import cfn_yaml
    from samtranslator.translator.transform import transform

    template = cfn_yaml.load(args.template)
    for logical_id, uri in parse_pairs(args.code, "--code").items():
        res = template.get("Resources", {}).get(logical_id)
        if res is None or res.get("Type") != "AWS::Serverless::Function":
            sys.exit(f"transform.py: --code {logical_id}: no AWS::Serverless::Function of that name")
        if not uri.startswith("s3://") or "/" not in uri[5:]:
            sys.exit(f"transform.py: --code {logical_id}={uri}: want s3://bucket/key")
        res["Properties"]["CodeUri"] = uri
        # A packaged template carries no build instructions.
        res.pop("Metadata", None)

    for logical_id, res in template.get("Resources", {}).items():
        if res.get("Type") != "AWS::Serverless::Function":
            continue
        uri = res.get("Properties", {}).get("CodeUri")
        if isinstance(uri, str) and not uri.startswith("s3://"):
            res["Properties"]["CodeUri"] = f"s3://sam-artifacts-offline/{logical_id}.zip"
            res.pop("Metadata", None)

    params = {"AWS::Region": args.region}
    params.update(parse_pairs(args.parameter, "--parameter"))
    out = transform(json.loads(json.dumps(template)), params, NoManagedPolicies())
    json.dump(out, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
