/**
 * Errors of building a revision. The message says what is wrong in the user's terms (the file,
 * the graph, the command that failed); `logTail` keeps the last lines that led to it.
 */

/** The project could not be built; the revision becomes `BUILD_FAILED`. */
export class BuildFailedError extends Error {
  /** The last lines of the build log before the failure (installer or validator output). */
  readonly logTail: string[];

  constructor(message: string, options?: { cause?: unknown; logTail?: string[] }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'BuildFailedError';
    this.logTail = options?.logTail ?? [];
  }
}

/** The build was stopped through its abort signal (for example, a newer revision replaced it). */
export class BuildCancelledError extends BuildFailedError {
  constructor(message = 'the build was cancelled', options?: { cause?: unknown; logTail?: string[] }) {
    super(message, options);
    this.name = 'BuildCancelledError';
  }
}

/** The uploaded tarball is unsafe or too large to unpack; nothing of it is kept. */
export class UnsafeTarballError extends BuildFailedError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'UnsafeTarballError';
  }
}
