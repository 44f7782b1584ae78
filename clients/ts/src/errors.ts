// Error codes and the error a failed call rejects with (docs/protocol.md, "Error codes").

/** The rpcd error codes: gRPC's numbers. Codes above 16 are reserved; an unknown one is kept as a number. */
export const Code = {
  OK: 0,
  Canceled: 1,
  Unknown: 2,
  InvalidArgument: 3,
  DeadlineExceeded: 4,
  NotFound: 5,
  AlreadyExists: 6,
  PermissionDenied: 7,
  ResourceExhausted: 8,
  FailedPrecondition: 9,
  Aborted: 10,
  OutOfRange: 11,
  Unimplemented: 12,
  Internal: 13,
  Unavailable: 14,
  DataLoss: 15,
  Unauthenticated: 16,
} as const;

/** One of the codes of {@link Code}, or a number outside the table. */
export type CodeNumber = (typeof Code)[keyof typeof Code] | number;

const codeNames: Record<number, string> = Object.fromEntries(Object.entries(Code).map(([k, v]) => [v, k]));

/** codeName is the name of code (`NotFound`), or `Code(17)` for a code outside the table. */
export function codeName(code: number): string {
  return codeNames[code] ?? `Code(${code})`;
}

/**
 * RpcError is how every call, stream and subscription of this package fails: the rpcd code, the
 * message, and the Unprocessed flag. `unprocessed` is true when the call was not acted on (refused
 * by the server, or never sent), so it may safely be sent again; false when it may have run.
 * Its `message` is `rpcd: <code name>: <message>`; `detail` holds the message alone.
 */
export class RpcError extends Error {
  /** The rpcd code: one of {@link Code}, or a number outside the table. */
  readonly code: CodeNumber;
  /** The message the peer sent, or this client's own words for a local failure. */
  readonly detail: string;
  /** True when the call was not acted on: it never ran, and may be sent again. */
  readonly unprocessed: boolean;

  constructor(code: CodeNumber, detail: string, unprocessed = false, options?: { cause?: unknown }) {
    super(`rpcd: ${codeName(code)}: ${detail}`, options);
    this.name = 'RpcError';
    this.code = code;
    this.detail = detail;
    this.unprocessed = unprocessed;
  }

  /** The name of the code: `NotFound`, or `Code(17)`. */
  get codeName(): string {
    return codeName(this.code);
  }
}

/** isCode reports whether err is an RpcError with the given code. */
export function isCode(err: unknown, code: CodeNumber): boolean {
  return err instanceof RpcError && err.code === code;
}
