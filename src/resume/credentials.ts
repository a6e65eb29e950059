import type { HeaderMap } from "./edge.js";
import { nodeCrypto } from "./node-crypto.js";

/**
 * Who may rejoin a run (protocol/README.md §16). The operator names what makes a credential:
 * request headers, and cookies by name (`--credential header:NAME`, `--credential cookie:NAME`,
 * `AGUI_STATE_CREDENTIALS`). By default only `Authorization`: the run's ids are unguessable
 * capabilities already, and a whole Cookie header changes whenever a load balancer or CDN rotates
 * its own cookie (AWSALB, __cf_bm), which broke every rejoin in silence. A credential is kept only as
 * an HMAC-SHA-256 under the server's key, never in clear, and compared in constant time.
 */
export type CredentialPart = { kind: "header" | "cookie"; name: string };

export interface CredentialPolicy {
  parts: readonly CredentialPart[];
  /** Whether a run started with no credential may be reloaded by /connect (`--connect-anonymous`); rejoins by id need no opt-in. */
  connectAnonymous: boolean;
}

export const DEFAULT_POLICY: CredentialPolicy = { parts: [{ kind: "header", name: "authorization" }], connectAnonymous: false };

/** `header:NAME` or `cookie:NAME`; undefined when it is neither. Header names are case-insensitive (RFC 9110 §5.1), cookie names are not (RFC 6265 §5.3). */
export function parsePart(spec: string): CredentialPart | undefined {
  const m = /^(header|cookie):([!#$%&'*+.^_`|~0-9A-Za-z-]+)$/.exec(spec.trim());
  if (!m) return undefined;
  const kind = m[1] as "header" | "cookie";
  return { kind, name: kind === "header" ? (m[2] as string).toLowerCase() : (m[2] as string) };
}

/** The value of the cookie `name` in a Cookie header (the first of that name, as user agents send the most specific first: RFC 6265 §5.4). */
function cookieValue(header: string | undefined, name: string): string | undefined {
  if (header === undefined) return undefined;
  for (const pair of header.split(";")) {
    const eq = pair.indexOf("=");
    if (eq >= 0 && pair.slice(0, eq).trim() === name) return pair.slice(eq + 1).trim();
  }
  return undefined;
}

/**
 * The request's credential under `key`: "" when it presents none of the named parts (anonymous),
 * else an HMAC of each part's presence and value, length-prefixed so no split of one value into the
 * next collides.
 */
export function credentialOf(key: Buffer, policy: CredentialPolicy, headers: HeaderMap): string {
  let text = "cred";
  let any = false;
  for (const part of policy.parts) {
    const v = part.kind === "header" ? headers[part.name] : cookieValue(headers["cookie"], part.name);
    if (v === undefined) text += "\0-";
    else {
      any = true;
      text += `\0+${v.length}\0${v}`;
    }
  }
  return any ? nodeCrypto().createHmac("sha256", key).update(text).digest("base64url") : "";
}

/** Equal strings, compared in a time that tells nothing of where they differ. */
export function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && nodeCrypto().timingSafeEqual(x, y);
}
