import type { CallResult as Outcome, CallError as ServiceError } from "../../src/protocol/errors.js";

/** Unwraps a service outcome, failing the test on an error value. */
export function ok<T>(o: Outcome<T>): T {
  if (!o.ok) throw new Error(`unexpected error: ${JSON.stringify(o.error)}`);
  return o.value;
}

/** Unwraps the error value of a service outcome, failing the test on success. */
export function fail<T>(o: Outcome<T>): ServiceError {
  if (o.ok) throw new Error(`expected an error, got ${JSON.stringify(o.value)}`);
  return o.error;
}
