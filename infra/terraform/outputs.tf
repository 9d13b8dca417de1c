output "webhook_url" {
  description = "The App's webhook URL (set on the GitHub App, with the secret of the webhook secret parameter)."
  value       = "${aws_lambda_function_url.app.function_url}webhook"
}

output "status_url" {
  description = "The read-only status page."
  value       = aws_lambda_function_url.app.function_url
}

output "table_name" {
  description = "The DynamoDB table; the Action's store input is dynamodb://TABLE?region=REGION."
  value       = aws_dynamodb_table.state.name
}

output "store_url" {
  description = "The store URL for the Action and the command line (jobs need AWS credentials allowed on the table)."
  value       = "dynamodb://${aws_dynamodb_table.state.name}?region=${local.region}"
}

output "function_name" {
  description = "The Lambda function."
  value       = aws_lambda_function.app.function_name
}

output "role_arn" {
  description = "The function's role."
  value       = aws_iam_role.function.arn
}
