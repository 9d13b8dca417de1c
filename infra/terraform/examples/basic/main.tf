# The smallest root module: the App from a release's Lambda zip, with secrets that already exist in
# SSM Parameter Store (latestwins app create prints the commands that put them there). Copied out of
# this repository, set source to the module's source string in docs/deploy.md.
#
#   curl -fsSLO https://github.com/latestwins/latestwins/releases/download/v1.4.2/latestwins-lambda-arm64.zip
#   terraform init && terraform apply -var app_id=123456 -var 'github_subjects=["repo:acme/api:ref:refs/heads/main"]'
#
# Then set the App's webhook URL to the webhook_url output (latestwins app create --url sets it when
# the stack exists first).

terraform {
  required_version = ">= 1.6"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 6.18, < 7.0"
    }
  }
}

provider "aws" {
  region = var.region
}

variable "region" {
  description = "The AWS region of the App."
  type        = string
  default     = "us-east-1"
}

variable "app_id" {
  description = "The GitHub App's numeric id."
  type        = string
}

variable "github_subjects" {
  description = "The sub claims of the workflows that may assume the workflow role for store: dynamodb:// (none: no role)."
  type        = list(string)
  default     = []
}

module "latestwins" {
  source = "../.."

  app_id          = var.app_id
  package_file    = "${path.root}/latestwins-lambda-arm64.zip"
  github_subjects = var.github_subjects
}

output "webhook_url" {
  description = "Set it as the GitHub App's webhook URL."
  value       = module.latestwins.webhook_url
}

output "store_url" {
  description = "The store input of workflows that use a store rather than the App's API."
  value       = module.latestwins.store_url
}

output "latestwins_role_arn" {
  description = "Set it as the variable LATESTWINS_ROLE_ARN of the repositories whose workflows use the store."
  value       = module.latestwins.latestwins_role_arn
}
