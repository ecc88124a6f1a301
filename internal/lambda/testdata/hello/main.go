// Command hello is the smallest aws-lambda-go function: the floor of a
// Lambda bootstrap's start-up, measured beside the cold start
// (BenchmarkHelloWorldInit).
package main

import "github.com/aws/aws-lambda-go/lambda"

func main() {
	lambda.Start(func() (string, error) { return "hello", nil })
}
