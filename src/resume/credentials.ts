import { nodeCrypto } from "./node-crypto.js";

/**
 * Who may rejoin a run (protocol/README.md §16): whoever presents the credentials of the request
 * that started it, its `Authorization` header and its cookies. They are kept only as an
 * HMAC-SHA-256 under the server's key, never in clear, and compared in constant time.
 */
export interface Presented {
  authorization?: string | undefined;
  cookie?: string | undefined;
}

export function credentialOf(key: Buffer, p: Presented): string {
  // Length-prefixed, so no split of one header's text into the other collides.
  const a = p.authorization ?? "";
  const c = p.cookie ?? "";
  return nodeCrypto().createHmac("sha256", key).update(`cred\0${a.length}\0${a}\0${c.length}\0${c}`).digest("base64url");
}

export function sameCredential(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && nodeCrypto().timingSafeEqual(x, y);
}
