package tail

import (
	"testing"

	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

func TestKindOf(t *testing.T) {
	for name, want := range map[string]Kind{
		telemetry.NameDelivered:               KindDelivered,
		telemetry.NameInvalid:                 KindInvalid,
		telemetry.NameFailed:                  KindFailed,
		telemetry.NameExecutedAfterACLRevoked: KindFailed,
		telemetry.NameDuplicate:               KindDuplicate,
		telemetry.NameWarmPathBan:             KindFairness,
		telemetry.NameAbuseDetected:           KindFairness,
		telemetry.NameLegacyKeyUsed:           KindSecret,
		telemetry.NameKeyExpiryImminent:       KindSecret,
		telemetry.NameSkewNearLimit:           KindSkew,
		telemetry.NameSkewSample:              KindSkew,
		telemetry.NameDropped:                 KindDropped,
		"snavio.cache.refreshed":              KindOther,
		"":                                    KindOther,
	} {
		if got := KindOf(name); got != want {
			t.Errorf("KindOf(%q) = %s, want %s", name, got, want)
		}
	}
}
