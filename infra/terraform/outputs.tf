output "webhook_url" {
  description = "The App's webhook URL (set on the GitHub App, with the secret of the webhook secret parameter)."
  value       = "${aws_lambda_function_url.app.function_url}webhook"
}

output "status_url" {
  description = "The Function URL, where the status page is (GET /) and the Action's api-url points. The page answers 404 unless status_page is open or github; /webhook, /healthz and /v1 answer in every mode."
  value       = aws_lambda_function_url.app.function_url
}

output "table_name" {
  description = "The DynamoDB table; the Action's store input is dynamodb://TABLE?region=REGION."
  value       = aws_dynamodb_table.state.name
}

output "store_url" {
  description = "The function's store: the store URL for the Action and the command line (the table: jobs need AWS credentials allowed on it; git_store: a token that may push to the repository)."
  value       = local.store
}

output "function_name" {
  description = "The Lambda function."
  value       = aws_lambda_function.app.function_name
}

output "role_arn" {
  description = "The function's role (not for workflows: see latestwins_role_arn)."
  value       = aws_iam_role.function.arn
}

output "status_page" {
  description = "Who sees the status page on the Function URL (off, open or github; auto is off on Lambda)."
  value       = var.status_page
}

output "latestwins_role_arn" {
  description = "The workflow role: set it as the repository or organization variable LATESTWINS_ROLE_ARN (role-to-assume of aws-actions/configure-aws-credentials). Null without github_subjects."
  value       = local.workflow_role ? aws_iam_role.workflow[0].arn : null
}

output "github_oidc_provider_arn" {
  description = "The GitHub identity provider the workflow role trusts (give it to another stack's github_oidc_provider_arn). Null without github_subjects."
  value       = local.workflow_role ? local.oidc_provider_arn : null
}
