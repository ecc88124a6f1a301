package telemetry

import "github.com/snavio/snavio/pkg/dispatch/envelope"

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
