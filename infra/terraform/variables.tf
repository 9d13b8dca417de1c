variable "name" {
  description = "Name of the function, its role and its log group (/aws/lambda/NAME)."
  type        = string
  default     = "latestwins"
}

variable "table_name" {
  description = "The DynamoDB table; the function's store URL becomes dynamodb://TABLE?region=REGION."
  type        = string
  default     = "latestwins"

  validation {
    condition     = can(regex("^[A-Za-z0-9_.-]{3,255}$", var.table_name))
    error_message = "A DynamoDB table name is 3 to 255 letters, digits, '_', '.' or '-'."
  }
}

variable "package_file" {
  description = "Path of the function's zip (latestwins-lambda-arm64.zip from a release, or scripts/build-lambda's). Give this, or code_bucket and code_key."
  type        = string
  default     = null
}

variable "code_bucket" {
  description = "S3 bucket holding the function's zip, instead of package_file."
  type        = string
  default     = null
}

variable "code_key" {
  description = "S3 key of the function's zip in code_bucket. Give each build its own key: the code is updated when the key changes."
  type        = string
  default     = null
}

variable "app_id" {
  description = "The GitHub App's numeric id (latestwins app create prints it)."
  type        = string

  validation {
    condition     = can(regex("^[0-9]+$", var.app_id))
    error_message = "The App id is a number."
  }
}

variable "webhook_secret_parameter" {
  description = "Name of the SecureString SSM parameter holding the App's webhook secret (starts with /)."
  type        = string
  default     = "/latestwins/webhook-secret"

  validation {
    condition     = can(regex("^/[A-Za-z0-9_.\\-/]+$", var.webhook_secret_parameter))
    error_message = "An SSM parameter name here starts with / and holds letters, digits, '_', '.', '-' and '/'."
  }
}

variable "app_private_key_parameter" {
  description = "Name of the SecureString SSM parameter holding the App's private key, PEM (starts with /)."
  type        = string
  default     = "/latestwins/app-private-key"

  validation {
    condition     = can(regex("^/[A-Za-z0-9_.\\-/]+$", var.app_private_key_parameter))
    error_message = "An SSM parameter name here starts with / and holds letters, digits, '_', '.' and '-' and '/'."
  }
}

variable "webhook_secret" {
  description = "The webhook secret. When set, the module creates the webhook secret parameter with it (the value is then also in the Terraform state); when null, the parameter must exist already."
  type        = string
  default     = null
  sensitive   = true
}

variable "app_private_key" {
  description = "The App's private key, PEM. When set, the module creates the private key parameter with it (the value is then also in the Terraform state); when null, the parameter must exist already."
  type        = string
  default     = null
  sensitive   = true
}

variable "github_api_url" {
  description = "GitHub's REST API (GitHub Enterprise Server: https://HOST/api/v3/)."
  type        = string
  default     = "https://api.github.com/"
}

variable "sweep_schedule_expression" {
  description = "How often the recovery sweep runs (an EventBridge schedule expression)."
  type        = string
  default     = "rate(5 minutes)"
}

variable "sweep_stall" {
  description = "How long pending work may sit idle with no live lease before the sweep re-drives it."
  type        = string
  default     = "10m"

  validation {
    condition     = can(regex("^[0-9]+(s|m|h)$", var.sweep_stall))
    error_message = "A duration such as 90s, 10m or 1h."
  }
}

variable "config_repo" {
  description = "OWNER/REPO whose .github/latestwins.yml defines the environments (empty: the .github repository of the account that owns the App). See docs/config.md."
  type        = string
  default     = ""

  validation {
    condition     = can(regex("^([A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100})?$", var.config_repo))
    error_message = "OWNER/REPO, e.g. acme/.github, or empty."
  }
}

variable "log_retention_days" {
  description = "Days the function's logs are kept."
  type        = number
  default     = 30

  validation {
    condition     = contains([1, 3, 5, 7, 14, 30, 60, 90, 180, 365], var.log_retention_days)
    error_message = "One of 1, 3, 5, 7, 14, 30, 60, 90, 180 or 365."
  }
}

variable "tags" {
  description = "Tags for every resource that takes them."
  type        = map(string)
  default     = {}
}

variable "github_subjects" {
  description = "The sub claims of the GitHub Actions OIDC tokens that may assume the workflow role (which reads and writes the table directly, for the Action's store: dynamodb:// input), as IAM StringLike patterns, e.g. [\"repo:acme/api:ref:refs/heads/main\", \"repo:acme/*:environment:production\"]. Empty: no workflow role and no identity provider are created."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for s in var.github_subjects : can(regex("^[^*?]", s))])
    error_message = "A subject pattern starts with a literal claim, e.g. repo:acme/api:ref:refs/heads/main or repo:acme/*:environment:production: one that starts with * or ? (or is empty) would let any repository's workflow assume the role."
  }
}

variable "github_oidc_provider_arn" {
  description = "The ARN of the account's existing identity provider for token.actions.githubusercontent.com (an account has one per URL, so a second stack reuses the first's). Empty: the module creates it when github_subjects is set."
  type        = string
  default     = ""

  validation {
    condition     = can(regex("^(arn:[a-z-]+:iam::[0-9]{12}:oidc-provider/token\\.actions\\.githubusercontent\\.com)?$", var.github_oidc_provider_arn))
    error_message = "The ARN of an IAM OIDC provider for token.actions.githubusercontent.com, or empty."
  }
}

variable "oidc_issuer" {
  description = "Issuer of the workflow OIDC tokens the /v1 API accepts (LATESTWINS_OIDC_ISSUER); GitHub Enterprise Server: https://HOST/_services/token."
  type        = string
  default     = "https://token.actions.githubusercontent.com"

  validation {
    condition     = can(regex("^https://[^/]+(/.*)?$", var.oidc_issuer))
    error_message = "An https:// URL of the token issuer, e.g. https://token.actions.githubusercontent.com."
  }
}

variable "oidc_audience" {
  description = "Audience the /v1 API requires in those tokens (LATESTWINS_OIDC_AUDIENCE); the Action's audience input must say the same."
  type        = string
  default     = "latestwins"

  validation {
    condition     = can(regex("^[^\\s]+$", var.oidc_audience))
    error_message = "An audience without spaces, e.g. latestwins."
  }
}

variable "retention" {
  description = "How long events and intent ids are kept (LATESTWINS_RETENTION), in days: at least 1d."
  type        = string
  default     = "90d"

  validation {
    condition     = can(regex("^[0-9]+d$", var.retention)) && var.retention != "0d"
    error_message = "A number of days such as 90d, at least 1d."
  }
}

variable "alert_after_seconds" {
  description = "The behind alarm fires when a scope has had an accepted commit that is not live for longer than this (the latestwins_scope_behind_seconds metric the scheduled sweep writes)."
  type        = number
  default     = 1800

  validation {
    condition     = var.alert_after_seconds >= 60
    error_message = "At least 60 seconds."
  }
}

variable "alarm_topic_arn" {
  description = "An SNS topic the two alarms notify (empty: they only change state)."
  type        = string
  default     = ""

  validation {
    condition     = can(regex("^(arn:[a-z-]+:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]+)?$", var.alarm_topic_arn))
    error_message = "The ARN of an SNS topic, or empty."
  }
}

variable "status_page" {
  description = "Who sees the status page on the Function URL (LATESTWINS_STATUS_PAGE): off (404; auto means the same on Lambda), open (anyone who can reach the URL) or github (sign in with GitHub, which needs public_url, app_client_id and the two parameters below)."
  type        = string
  default     = "off"

  validation {
    condition     = contains(["auto", "off", "open", "github"], var.status_page)
    error_message = "One of auto, off, open or github."
  }
}

variable "public_url" {
  description = "For status_page github: the Function URL (the status_url output, https://ID.lambda-url.REGION.on.aws) or your domain in front of it. Known only after the first apply, so give it on the second."
  type        = string
  default     = ""

  validation {
    condition     = can(regex("^(https://[^/]+/?)?$", var.public_url))
    error_message = "An https:// URL with no path, or empty."
  }
}

variable "app_client_id" {
  description = "For status_page github: the App's client id (the App's settings page, General)."
  type        = string
  default     = ""
}

variable "app_client_secret_parameter" {
  description = "For status_page github: name of the SecureString SSM parameter holding a client secret of the App (starts with /)."
  type        = string
  default     = "/latestwins/app-client-secret"

  validation {
    condition     = can(regex("^/[A-Za-z0-9_.\\-/]+$", var.app_client_secret_parameter))
    error_message = "An SSM parameter name here starts with / and holds letters, digits, '_', '.', '-' and '/'."
  }
}

variable "session_key_parameter" {
  description = "For status_page github: name of the SecureString SSM parameter holding at least 32 random bytes that seal the sign-in cookies (starts with /)."
  type        = string
  default     = "/latestwins/session-key"

  validation {
    condition     = can(regex("^/[A-Za-z0-9_.\\-/]+$", var.session_key_parameter))
    error_message = "An SSM parameter name here starts with / and holds letters, digits, '_', '.', '-' and '/'."
  }
}

variable "alert_secret_parameter" {
  description = "Name of the SecureString SSM parameter holding the secret the convergence alarms' webhook posts are signed with (alert-webhook in the trusted file; starts with /). Empty: no alarm is posted (alert-issue needs no secret)."
  type        = string
  default     = ""

  validation {
    condition     = var.alert_secret_parameter == "" || can(regex("^/[A-Za-z0-9_.\\-/]+$", var.alert_secret_parameter))
    error_message = "An SSM parameter name here starts with / and holds letters, digits, '_', '.', '-' and '/'; or leave it empty."
  }
}

variable "github_url" {
  description = "For status_page github: where users sign in (GitHub Enterprise Server: https://HOST); also the host of a git_store github://OWNER/REPO."
  type        = string
  default     = "https://github.com"
}

variable "git_store" {
  description = "Keep the state as refs of a git repository instead of the table (LATESTWINS_STORE): github://OWNER/REPO (on github_url's host) or git+https://HOST/OWNER/REPO.git, with git_token_parameter. Workflows then give the Action the same store (store_url), not the table. Empty: the table."
  type        = string
  default     = ""

  validation {
    condition     = can(regex("^(github://[A-Za-z0-9](?:[A-Za-z0-9_]|-[A-Za-z0-9_])*/[A-Za-z0-9._-]+|git\\+https://[^\\s?#@]+)?$", var.git_store))
    error_message = "A git store here is github://OWNER/REPO or git+https://HOST/OWNER/REPO.git (no credentials in it: see git_token_parameter); or leave it empty."
  }
}

variable "git_token_parameter" {
  description = "For git_store: name of the SecureString SSM parameter holding the token the function pushes the state with (LATESTWINS_GIT_TOKEN_SSM_PARAMETER; a token that may write the repository's contents; starts with /). Empty: none."
  type        = string
  default     = ""

  validation {
    condition     = var.git_token_parameter == "" || can(regex("^/[A-Za-z0-9_.\\-/]+$", var.git_token_parameter))
    error_message = "An SSM parameter name here starts with / and holds letters, digits, '_', '.', '-' and '/'; or leave it empty."
  }
}
