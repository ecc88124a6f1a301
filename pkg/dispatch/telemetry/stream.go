package telemetry

import (
	"strings"

	"github.com/snavio/snavio/pkg/dispatch/envelope"
)

// PlatformTenant is the stream of events that belong to no tenant, such as
// escalations and ingress refusals. It is not a tenant id (it starts with
// '_'), so no tenant's stream can take its name.
const PlatformTenant = "_platform"

// StreamRule says what ValidStream accepts, for error messages.
const StreamRule = "a tenant id (" + envelope.TenantRule + ") or " + PlatformTenant

// ValidStream reports whether s names a telemetry stream: a tenant id
// (envelope.ValidTenant) or PlatformTenant.
func ValidStream(s string) bool {
	return s == PlatformTenant || envelope.ValidTenant(s)
}

// StreamOf returns the stream e is filed under and whether e belongs to the
// tenant catalog (docs/security/telemetry.md). A catalog event goes to the
// tenant of its source (the part before '/'), or to PlatformTenant when
// that is not a tenant id; every other event (escalations, cache
// refreshes, snapshot failures) is the platform's own.
func StreamOf(e Event) (stream string, catalog bool) {
	var src string
	switch v := e.(type) {
	case Delivered:
		src = v.Source
	case Invalid:
		src = v.Source
	case Failed:
		src = v.Source
	case Duplicate:
		src = v.Source
	case ExecutedAfterACLRevoked:
		src = v.Source
	case WarmPathBan:
		src = v.Source
	case AbuseDetected:
		src = v.Source
	case LegacyKeyUsed:
		src = v.Source
	case KeyExpiryImminent:
		src = v.Source
	case SkewNearLimit:
		src = v.Source
	case SkewSample:
		src = v.Source
	case Dropped:
		return v.Tenant, true
	default:
		return PlatformTenant, false
	}
	tenant, _, _ := strings.Cut(src, "/")
	if !envelope.ValidTenant(tenant) {
		return PlatformTenant, true
	}
	return tenant, true
}
