// Command bootstrap is the App as an AWS Lambda function (runtime provided.al2023, or a container
// image): Function URL and API Gateway v2 HTTP events go to the App, EventBridge scheduled events
// run the recovery sweep. Settings are read once at cold start; see docs/deploy.md.
//
// Build: CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build -tags lambda.norpc -o bootstrap ./lambda/cmd/bootstrap
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	awslambda "github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/latestwins/latestwins/lambda"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := realMain(ctx); err != nil {
		slog.Error("latestwins lambda refused to start", "err", err)
		os.Exit(1)
	}
}

func realMain(ctx context.Context) error {
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	slog.SetDefault(log)
	var params lambda.ParameterReader
	if lambda.UsesSSM(os.Getenv) {
		cfg, err := config.LoadDefaultConfig(ctx)
		if err != nil {
			return fmt.Errorf("load AWS configuration for SSM: %w", err)
		}
		params = ssm.NewFromConfig(cfg)
	}
	s, err := lambda.LoadSettings(ctx, os.Getenv, params)
	if err != nil {
		return err
	}
	h, err := lambda.Build(ctx, s, nil, log)
	if err != nil {
		return err
	}
	awslambda.StartWithOptions(h.Handle, awslambda.WithContext(ctx))
	return nil
}
