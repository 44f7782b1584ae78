package auth

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/rpcd/rpcd/handler"
	"github.com/rpcd/rpcd/proto"
)

// The parsers of the texts rpcd serve takes its security settings in
// (docs/configuration.md): auth-tokens' file, auth-hmac-key's,
// auth-require's roles and auth-topics' rules.

// ReadTokens reads a token file: one token a line, "TOKEN SUBJECT
// [ROLE,...]"; blank lines and lines starting with # are skipped. A file
// with no token is an error.
func ReadTokens(file string) (Tokens, error) {
	fh, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("rpcd: auth: reading tokens: %w", err)
	}
	defer fh.Close()
	tokens := Tokens{}
	sc := bufio.NewScanner(fh)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 2 || len(fields) > 3 {
			return nil, fmt.Errorf("rpcd: auth: %s:%d: want TOKEN SUBJECT [ROLE,...]", file, n)
		}
		id := &handler.Identity{Subject: fields[1]}
		if len(fields) == 3 {
			id.Roles = strings.Split(fields[2], ",")
		}
		tokens[fields[0]] = id
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("rpcd: auth: reading tokens: %w", err)
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("rpcd: auth: no token in %s", file)
	}
	return tokens, nil
}

// ReadHMACKey reads an HMAC key (HMAC.Key): the file's bytes, trailing
// white space dropped; at least 16 bytes.
func ReadHMACKey(file string) ([]byte, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("rpcd: auth: reading the HMAC key: %w", err)
	}
	key := []byte(strings.TrimRight(string(b), " \t\r\n"))
	if len(key) < 16 {
		return nil, fmt.Errorf("rpcd: auth: the HMAC key in %s has %d bytes, want at least 16", file, len(key))
	}
	return key, nil
}

// ParseRoles parses the roles each route requires, for Roles:
// "ROUTE=ROLE[|ROLE...],...". An empty text gives nil.
//
//	ParseRoles("Math/Sum=admin,Admin/Drop=admin|ops")
func ParseRoles(text string) (map[string][]string, error) {
	if text == "" {
		return nil, nil
	}
	byRoute := map[string][]string{}
	for _, item := range strings.Split(text, ",") {
		route, roles, ok := strings.Cut(item, "=")
		if !ok || route == "" || roles == "" {
			return nil, fmt.Errorf("rpcd: auth: item %q is not ROUTE=ROLE[|ROLE...]", item)
		}
		byRoute[route] = strings.Split(roles, "|")
	}
	return byRoute, nil
}

// ParseTopicRules parses topic rules by role, for Topics: rules separated
// by ';' or new lines, each ACTION:PATTERN=ROLE[|ROLE...], ACTION one of
// pub, sub, deny-pub and deny-sub. A pattern may hold any byte a pattern
// may but ';' (the roles follow its last '='). A text of white space alone
// gives nil; one of separators alone is an error.
//
//	ParseTopicRules("pub:orders.>=writer; sub:orders.>=reader|ops; deny-sub:orders.internal.>=reader")
func ParseTopicRules(text string) (map[string]TopicRules, error) {
	items := strings.FieldsFunc(text, func(r rune) bool { return r == ';' || r == '\n' })
	byRole := map[string]TopicRules{}
	for _, item := range items {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		action, rest, _ := strings.Cut(item, ":")
		i := strings.LastIndexByte(rest, '=')
		if i < 0 || rest[:i] == "" || rest[i+1:] == "" {
			return nil, fmt.Errorf("rpcd: auth: rule %q is not ACTION:PATTERN=ROLE[|ROLE...]", item)
		}
		pattern, roles := rest[:i], strings.Split(rest[i+1:], "|")
		if err := proto.ValidPattern([]byte(pattern)); err != nil {
			return nil, fmt.Errorf("rpcd: auth: rule %q: %v", item, strings.TrimPrefix(err.Error(), "rpcd: protocol error: "))
		}
		for _, role := range roles {
			if role == "" {
				return nil, fmt.Errorf("rpcd: auth: rule %q has an empty role", item)
			}
			r := byRole[role]
			switch action {
			case "pub":
				r.Publish.Allow = append(r.Publish.Allow, pattern)
			case "sub":
				r.Subscribe.Allow = append(r.Subscribe.Allow, pattern)
			case "deny-pub":
				r.Publish.Deny = append(r.Publish.Deny, pattern)
			case "deny-sub":
				r.Subscribe.Deny = append(r.Subscribe.Deny, pattern)
			default:
				return nil, fmt.Errorf("rpcd: auth: rule %q: action %q, want pub, sub, deny-pub or deny-sub", item, action)
			}
			byRole[role] = r
		}
	}
	if len(byRole) == 0 {
		if strings.TrimSpace(text) != "" {
			return nil, fmt.Errorf("rpcd: auth: no topic rule in %q", text)
		}
		return nil, nil
	}
	return byRole, nil
}
