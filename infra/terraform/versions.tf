terraform {
  required_version = ">= 1.6"

  required_providers {
    aws = {
      source = "hashicorp/aws"
      # 6.18 or newer: aws_lambda_permission's invoked_via_function_url.
      version = ">= 6.18, < 7.0"
    }
  }
}
