package reason

// Hint says what a producer should do about a rejection with code c, in
// a few words: the "what the producer should do" column of
// docs/security/reason-codes.md without its Markdown (TestHints keeps
// them equal); "" for a code it does not know.
func Hint(c Code) string {
	switch c {
	case TooLarge:
		return "send less; large data belongs in a store the payload points to"
	case MalformedJSON:
		return "serialize with a JSON library"
	case TooDeep:
		return "flatten the payload"
	case TooManyMembers:
		return "send bulk data as arrays, or split the command"
	case DuplicateMember:
		return "send each name once"
	case UnknownMember:
		return "remove it / fix the case"
	case MissingField:
		return "add it"
	case WrongType:
		return "send the documented type"
	case CommandSourcePresent:
		return "remove it; the dispatcher sets it"
	case InvalidID:
		return "send a UUIDv4 in lowercase"
	case InvalidTimestamp:
		return "send RFC 3339, e.g. 2025-04-07T12:58:00.000Z"
	case InvalidEventType:
		return "fix the type"
	case InvalidHMAC:
		return "send the hex HMAC-SHA256 (docs/security/signing.md)"
	case InvalidVersionID:
		return "send the version id from the tenant config"
	case InvalidTarget:
		return "use the registered service name"
	case InvalidCommandName:
		return "use the registered command name"
	case InvalidPayload:
		return "send plain JSON"
	case InvalidReplay:
		return "only the replayer sets these"
	case InvalidBusSource:
		return "send with the registered source"
	case TimestampTooOld:
		return "sign with the current time; sync the clock (NTP)"
	case TimestampTooNew:
		return "sync the clock (NTP)"
	case UnknownSource:
		return "register the service / check the source"
	case UnknownKeyVersion:
		return "sign with the current version"
	case KeyNotYetValid:
		return "keep signing with the current version until activated_at"
	case KeyExpired:
		return "poll the tenant config and use the current version"
	case BadSignature:
		return "sign exactly as docs/security/signing.md says, with the right secret and source"
	case SourceBanned:
		return "wait for the ban to end; see fairness telemetry"
	case DedupeConflict:
		return "give every distinct command a fresh UUID; reuse an id only to retry the same command"
	}
	return ""
}
