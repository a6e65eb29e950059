import type { Delivery, Kind, Outcome } from "../api.js";
import { badge, h } from "./view.js";

/**
 * The page's words for the two closed sets of §13, and what each counts: a
 * finding's kind says what the client does with the event as the server sent
 * it; its outcome, what the proxy did about it. One finding has both, so
 * "wiped 4" and "kept 4" can count the same four members: four that a
 * snapshot as sent would wipe, and that the proxy kept (issue 31). The page
 * says so beside the counts, and in each badge's title.
 */

export const KINDS: readonly Kind[] = ["fatal", "dropped", "ignored", "wiped"];
export const OUTCOMES: readonly Outcome[] = ["mended", "discarded", "kept", "passed"];

const KIND_MEANS: Record<Kind, string> = {
  fatal: "the client's run fails at the event",
  dropped: "the client drops the event or op, with a warning",
  ignored: "the client skips the event without a word",
  wiped: "a member the client held that a snapshot replaces or removes",
};

/** What a finding without a kind is about (§13: REWRITTEN, NOTHING_MOVED, ...). */
export const APPLIES_MEANS = "the client would have applied this op as sent; the repair rewrote it or left it out all the same";

const OUTCOME_MEANS: Record<Outcome, string> = {
  mended: "sent rewritten, so that it applies",
  discarded: "not sent",
  kept: "the client's value left standing instead of the snapshot's (--own)",
  passed: "sent as it came",
};

/** An event's delivery: what the client got for it. */
export const DELIVERY_MEANS: Record<Delivery, string> = {
  passed: "the client got this event as the server sent it",
  mended: "the client got this event rewritten: see the ops as forwarded",
  discarded: "the client got nothing for this event",
};

const plural = (n: number): string => `${n} finding${n === 1 ? "" : "s"}`;

/**
 * The findings counted by kind ("as sent") and, when given, by outcome ("the
 * proxy"): the two counts of one set of findings, each labelled.
 */
export function counts(kinds: Partial<Record<Kind, number>>, outcomes?: Record<Outcome, number>, labels = true): HTMLElement {
  const span = h("span", { class: "counts" });
  const label = (text: string): HTMLElement | null => (labels ? h("span", { class: "label" }, text) : null);
  const by = h("span", { class: "group kinds" }, label("as sent:"));
  for (const k of KINDS) {
    const n = kinds[k] ?? 0;
    if (n > 0) by.append(badge(`kind-${k}`, `${k} ${n}`, `${plural(n)} about the event as sent: ${KIND_MEANS[k]}`));
  }
  if (by.querySelector(".badge")) span.append(by);
  if (outcomes) {
    const did = h("span", { class: "group outcomes" }, label("the proxy:"));
    for (const o of OUTCOMES) if (outcomes[o] > 0) did.append(badge(`outcome-${o}`, `${o} ${outcomes[o]}`, `${plural(outcomes[o])}, by what the proxy did: ${OUTCOME_MEANS[o]}`));
    if (did.querySelector(".badge")) span.append(did);
  }
  return span;
}

/** What each word in the counts means, for the words that appear: each finding counts once in each group. */
export function legend(kinds: Partial<Record<Kind, number>>, outcomes?: Record<Outcome, number>): HTMLElement | null {
  const asSent = KINDS.filter((k) => (kinds[k] ?? 0) > 0).map((k) => `${k}: ${KIND_MEANS[k]}`);
  const did = OUTCOMES.filter((o) => (outcomes?.[o] ?? 0) > 0).map((o) => `${o}: ${OUTCOME_MEANS[o]}`);
  const parts = [asSent.length ? `As sent, ${asSent.join("; ")}.` : "", did.length ? `The proxy, for the same findings, ${did.join("; ")}.` : ""];
  return asSent.length + did.length === 0 ? null : h("p", { class: "legend muted small", id: "legend" }, parts.filter(Boolean).join(" "));
}

/** An event's badge for what the client got. */
export const delivery = (d: Delivery): HTMLElement => badge(`outcome-${d}`, d, DELIVERY_MEANS[d]);
