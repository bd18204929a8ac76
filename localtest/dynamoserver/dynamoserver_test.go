package dynamoserver_test

import (
	"testing"

	"github.com/lambda-dedupe/dedupe/localtest/dynamoserver"
)

func TestServerKind(t *testing.T) {
	tests := []struct {
		name, value string
		want        dynamoserver.Server
		allOld, ttl bool
		known       bool
	}{
		{"dynalite", "dynalite", dynamoserver.Dynalite, false, false, true},
		{"moto", "moto", dynamoserver.Moto, true, true, true},
		{"unset", "", dynamoserver.Endpoint, false, false, false},
		{"other", "dynamodb-local", dynamoserver.Endpoint, false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(dynamoserver.EnvServer, tt.value)
			if got := dynamoserver.ServerKind(); got != tt.want {
				t.Errorf("ServerKind: got %q, want %q", got, tt.want)
			}
			if got, ok := dynamoserver.ReturnsOldItemOnConditionFailure(); got != tt.allOld || ok != tt.known {
				t.Errorf("ReturnsOldItemOnConditionFailure: got %v, %v, want %v, %v", got, ok, tt.allOld, tt.known)
			}
			if got, ok := dynamoserver.HasTTLAPI(); got != tt.ttl || ok != tt.known {
				t.Errorf("HasTTLAPI: got %v, %v, want %v, %v", got, ok, tt.ttl, tt.known)
			}
		})
	}
}
