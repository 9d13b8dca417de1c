# latestwins, the GitHub App on AWS Lambda: the same stack as infra/latestwins.yaml (CloudFormation).
# infra/terraform_test.go reads these files and checks them against the code: the table against the
# one `latestwins migrate` creates, the role's actions against the calls the store makes.

data "aws_partition" "current" {}
data "aws_region" "current" {}
data "aws_caller_identity" "current" {}

locals {
  region    = data.aws_region.current.region
  account   = data.aws_caller_identity.current.account_id
  partition = data.aws_partition.current.partition
  parameter_arns = [
    "arn:${local.partition}:ssm:${local.region}:${local.account}:parameter${var.webhook_secret_parameter}",
    "arn:${local.partition}:ssm:${local.region}:${local.account}:parameter${var.app_private_key_parameter}",
  ]
  # The sign-in's secrets, read only when the status page signs users in.
  sign_in_parameter_arns = [
    "arn:${local.partition}:ssm:${local.region}:${local.account}:parameter${var.app_client_secret_parameter}",
    "arn:${local.partition}:ssm:${local.region}:${local.account}:parameter${var.session_key_parameter}",
  ]
  # The convergence alarms' secret, read only when one is named.
  alert_parameter_arns = [
    "arn:${local.partition}:ssm:${local.region}:${local.account}:parameter${var.alert_secret_parameter}",
  ]
  # The git store's token, read only when one is named.
  git_token_parameter_arns = [
    "arn:${local.partition}:ssm:${local.region}:${local.account}:parameter${var.git_token_parameter}",
  ]
  # The function's store: the table, or the git repository git_store names.
  store                = var.git_store != "" ? var.git_store : "dynamodb://${aws_dynamodb_table.state.name}?region=${local.region}"
  workflow_role        = length(var.github_subjects) > 0
  create_oidc_provider = local.workflow_role && var.github_oidc_provider_arn == ""
  oidc_provider_arn    = local.create_oidc_provider ? aws_iam_openid_connect_provider.github[0].arn : var.github_oidc_provider_arn
}

# The table exactly as `latestwins migrate` (internal/store/dynamo.Migrate) creates it.
resource "aws_dynamodb_table" "state" {
  name         = var.table_name
  billing_mode = "PAY_PER_REQUEST"
  hash_key     = "pk"

  attribute {
    name = "pk"
    type = "S"
  }

  attribute {
    name = "pending"
    type = "S"
  }

  # The sparse index of environments with pending work, which the sweep queries (never a scan).
  global_secondary_index {
    name            = "pending"
    hash_key        = "pending"
    range_key       = "pk"
    projection_type = "KEYS_ONLY"
  }

  ttl {
    attribute_name = "expires_at_epoch"
    enabled        = true
  }

  point_in_time_recovery {
    enabled = true
  }

  server_side_encryption {
    enabled = true
  }

  tags = var.tags

  # The state of every environment: never destroyed with the stack.
  lifecycle {
    prevent_destroy = true
  }
}

resource "aws_ssm_parameter" "webhook_secret" {
  count       = var.webhook_secret == null ? 0 : 1
  name        = var.webhook_secret_parameter
  description = "latestwins: the GitHub App's webhook secret"
  type        = "SecureString"
  value       = var.webhook_secret
  tags        = var.tags
}

resource "aws_ssm_parameter" "app_private_key" {
  count       = var.app_private_key == null ? 0 : 1
  name        = var.app_private_key_parameter
  description = "latestwins: the GitHub App's private key (PEM)"
  type        = "SecureString"
  tier        = "Advanced" # a PEM key with its header is near the 4 KB limit of the standard tier
  value       = var.app_private_key
  tags        = var.tags
}

resource "aws_cloudwatch_log_group" "function" {
  name              = "/aws/lambda/${var.name}"
  retention_in_days = var.log_retention_days
  tags              = var.tags
}

data "aws_iam_policy_document" "assume" {
  statement {
    effect  = "Allow"
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
  }
}

data "aws_iam_policy_document" "function" {
  # Documents are read with GetItem and written with one conditional PutItem each; the sweep queries
  # the pending index. Nothing else: no Scan, no DeleteItem, no table admin.
  statement {
    sid     = "Table"
    effect  = "Allow"
    actions = ["dynamodb:BatchGetItem", "dynamodb:BatchWriteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem"]
    resources = [
      aws_dynamodb_table.state.arn,
      "${aws_dynamodb_table.state.arn}/index/pending",
    ]
  }

  statement {
    sid       = "Secrets"
    effect    = "Allow"
    actions   = ["ssm:GetParameter"]
    resources = local.parameter_arns
  }

  dynamic "statement" {
    for_each = var.status_page == "github" ? [1] : []
    content {
      sid       = "SignInSecrets"
      effect    = "Allow"
      actions   = ["ssm:GetParameter"]
      resources = local.sign_in_parameter_arns
    }
  }

  dynamic "statement" {
    for_each = var.alert_secret_parameter != "" ? [1] : []
    content {
      sid       = "AlertSecret"
      effect    = "Allow"
      actions   = ["ssm:GetParameter"]
      resources = local.alert_parameter_arns
    }
  }

  dynamic "statement" {
    for_each = var.git_token_parameter != "" ? [1] : []
    content {
      sid       = "GitToken"
      effect    = "Allow"
      actions   = ["ssm:GetParameter"]
      resources = local.git_token_parameter_arns
    }
  }

  # SecureString values are decrypted by SSM on the function's behalf, and only that way.
  statement {
    sid       = "DecryptSecretsThroughSSM"
    effect    = "Allow"
    actions   = ["kms:Decrypt"]
    resources = ["arn:${local.partition}:kms:${local.region}:${local.account}:key/*"]

    condition {
      test     = "StringEquals"
      variable = "kms:ViaService"
      values   = ["ssm.${local.region}.amazonaws.com"]
    }
  }

  statement {
    sid       = "Logs"
    effect    = "Allow"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.function.arn}:*"]
  }
}

resource "aws_iam_role" "function" {
  name               = var.name
  assume_role_policy = data.aws_iam_policy_document.assume.json
  tags               = var.tags
}

resource "aws_iam_role_policy" "function" {
  name   = "latestwins"
  role   = aws_iam_role.function.id
  policy = data.aws_iam_policy_document.function.json
}

resource "aws_lambda_function" "app" {
  function_name = var.name
  description   = "latestwins, the GitHub App (webhooks, status page, recovery sweep)"
  role          = aws_iam_role.function.arn
  runtime       = "provided.al2023"
  architectures = ["arm64"]
  handler       = "bootstrap"
  memory_size   = 256
  # A webhook is answered within GitHub's 10 seconds; the sweep may take longer. The function stops
  # its work half a second before its deadline to answer.
  timeout = 30

  filename         = var.package_file
  source_code_hash = var.package_file == null ? null : filebase64sha256(var.package_file)
  s3_bucket        = var.code_bucket
  s3_key           = var.code_key

  logging_config {
    log_format = "JSON"
    log_group  = aws_cloudwatch_log_group.function.name
  }

  environment {
    variables = {
      LATESTWINS_STORE                           = local.store
      LATESTWINS_WEBHOOK_SECRET_SSM_PARAMETER    = var.webhook_secret_parameter
      LATESTWINS_APP_PRIVATE_KEY_SSM_PARAMETER   = var.app_private_key_parameter
      LATESTWINS_APP_ID                          = var.app_id
      LATESTWINS_GITHUB_API_URL                  = var.github_api_url
      LATESTWINS_SWEEP_STALL                     = var.sweep_stall
      LATESTWINS_CONFIG_REPO                     = var.config_repo
      LATESTWINS_OIDC_ISSUER                     = var.oidc_issuer
      LATESTWINS_OIDC_AUDIENCE                   = var.oidc_audience
      LATESTWINS_RETENTION                       = var.retention
      LATESTWINS_STATUS_PAGE                     = var.status_page
      LATESTWINS_PUBLIC_URL                      = var.public_url
      LATESTWINS_APP_CLIENT_ID                   = var.app_client_id
      LATESTWINS_APP_CLIENT_SECRET_SSM_PARAMETER = var.app_client_secret_parameter
      LATESTWINS_SESSION_KEY_SSM_PARAMETER       = var.session_key_parameter
      LATESTWINS_GITHUB_URL                      = var.github_url
      LATESTWINS_ALERT_SECRET_SSM_PARAMETER      = var.alert_secret_parameter
      LATESTWINS_GIT_TOKEN_SSM_PARAMETER         = var.git_token_parameter
    }
  }

  tags = var.tags

  lifecycle {
    precondition {
      condition     = (var.package_file != null) != (var.code_bucket != null && var.code_key != null)
      error_message = "Give the function's zip either as package_file or as code_bucket and code_key, not both."
    }
  }

  # The function reads its secrets at cold start: they exist before it does.
  depends_on = [aws_iam_role_policy.function, aws_ssm_parameter.webhook_secret, aws_ssm_parameter.app_private_key]
}

# Webhooks and the status page. No IAM auth: GitHub cannot sign requests with AWS credentials; the
# webhook signature (X-Hub-Signature-256) and, for the API, GitHub's OIDC tokens authenticate.
resource "aws_lambda_function_url" "app" {
  function_name      = aws_lambda_function.app.function_name
  authorization_type = "NONE"
}

resource "aws_lambda_permission" "url_invoke_url" {
  statement_id           = "FunctionUrlInvokeUrl"
  function_name          = aws_lambda_function.app.function_name
  action                 = "lambda:InvokeFunctionUrl"
  principal              = "*"
  function_url_auth_type = "NONE"
}

resource "aws_lambda_permission" "url_invoke_function" {
  statement_id             = "FunctionUrlInvokeFunction"
  function_name            = aws_lambda_function.app.function_name
  action                   = "lambda:InvokeFunction"
  principal                = "*"
  invoked_via_function_url = true
}

resource "aws_cloudwatch_event_rule" "sweep" {
  name                = "${var.name}-sweep"
  description         = "latestwins recovery sweep"
  schedule_expression = var.sweep_schedule_expression
  state               = "ENABLED"
  tags                = var.tags
}

resource "aws_cloudwatch_event_target" "sweep" {
  rule      = aws_cloudwatch_event_rule.sweep.name
  target_id = "sweep"
  arn       = aws_lambda_function.app.arn
}

resource "aws_lambda_permission" "sweep" {
  statement_id  = "SweepInvoke"
  function_name = aws_lambda_function.app.function_name
  action        = "lambda:InvokeFunction"
  principal     = "events.amazonaws.com"
  source_arn    = aws_cloudwatch_event_rule.sweep.arn
}

# A failed sweep is not retried: the next scheduled one retries, and a failed re-drive costs no attempt.
resource "aws_lambda_function_event_invoke_config" "sweep" {
  function_name          = aws_lambda_function.app.function_name
  qualifier              = "$LATEST"
  maximum_retry_attempts = 0
}

# GitHub's identity provider, for the workflow role. AWS no longer checks the thumbprints of
# token.actions.githubusercontent.com (it trusts its certificate authority), but older releases of
# the AWS provider require the list; these are GitHub's published ones, as in the template.
resource "aws_iam_openid_connect_provider" "github" {
  count           = local.create_oidc_provider ? 1 : 0
  url             = "https://token.actions.githubusercontent.com"
  client_id_list  = ["sts.amazonaws.com"]
  thumbprint_list = ["6938fd4d98bab03faadb97b34396831e3780aea1", "1c58a3a8518e8759bf075b76b750d4f2df264fcd"]
  tags            = var.tags
}

data "aws_iam_policy_document" "workflow_assume" {
  count = local.workflow_role ? 1 : 0

  statement {
    effect  = "Allow"
    actions = ["sts:AssumeRoleWithWebIdentity"]

    principals {
      type        = "Federated"
      identifiers = [local.oidc_provider_arn]
    }

    condition {
      test     = "StringEquals"
      variable = "token.actions.githubusercontent.com:aud"
      values   = ["sts.amazonaws.com"]
    }

    condition {
      test     = "StringLike"
      variable = "token.actions.githubusercontent.com:sub"
      values   = var.github_subjects
    }
  }
}

data "aws_iam_policy_document" "workflow" {
  # The calls the store makes, as for the function; no Scan (latestwins migrate needs it, and is run
  # by an operator, not a workflow), no DeleteItem, no table admin.
  statement {
    sid     = "Table"
    effect  = "Allow"
    actions = ["dynamodb:BatchGetItem", "dynamodb:BatchWriteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem"]
    resources = [
      aws_dynamodb_table.state.arn,
      "${aws_dynamodb_table.state.arn}/index/pending",
    ]
  }
}

# The role a workflow assumes (aws-actions/configure-aws-credentials) to use the table directly, with
# the Action's store: dynamodb:// input. Direct access bypasses the App's checks: any job that can
# assume it may write any environment's state. The sub patterns say which jobs can.
resource "aws_iam_role" "workflow" {
  count                = local.workflow_role ? 1 : 0
  name                 = "${var.name}-workflow"
  description          = "latestwins: GitHub Actions workflows that use the state table directly (store: dynamodb://)"
  max_session_duration = 3600
  assume_role_policy   = data.aws_iam_policy_document.workflow_assume[0].json
  tags                 = var.tags
}

resource "aws_iam_role_policy" "workflow" {
  count  = local.workflow_role ? 1 : 0
  name   = "latestwins-store"
  role   = aws_iam_role.workflow[0].id
  policy = data.aws_iam_policy_document.workflow.json
}

# The function writes its figures as Embedded Metric Format lines in its log (internal/metrics); the
# scheduled sweep writes each scope's behind time, and the largest without dimensions.
resource "aws_cloudwatch_metric_alarm" "behind" {
  alarm_name          = "${var.name}-behind"
  alarm_description   = "A scope of latestwins has had an accepted commit that is not live for longer than alert_after_seconds: see the status page or latestwins status for which."
  namespace           = "latestwins"
  metric_name         = "latestwins_scope_behind_seconds"
  statistic           = "Maximum"
  period              = 300
  evaluation_periods  = 1
  threshold           = var.alert_after_seconds
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_topic_arn == "" ? [] : [var.alarm_topic_arn]
  ok_actions          = var.alarm_topic_arn == "" ? [] : [var.alarm_topic_arn]
  tags                = var.tags
}

resource "aws_cloudwatch_metric_alarm" "sweep_errors" {
  alarm_name          = "${var.name}-sweep-errors"
  alarm_description   = "The recovery sweep of latestwins failed more than once in 15 minutes: stalled work is not re-driven. The function's log says which environments and why."
  namespace           = "latestwins"
  metric_name         = "latestwins_sweeps_total"
  dimensions          = { result = "error" }
  statistic           = "Sum"
  period              = 900
  evaluation_periods  = 1
  threshold           = 1
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = var.alarm_topic_arn == "" ? [] : [var.alarm_topic_arn]
  ok_actions          = var.alarm_topic_arn == "" ? [] : [var.alarm_topic_arn]
  tags                = var.tags
}
