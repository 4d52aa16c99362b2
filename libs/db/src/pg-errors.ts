/** Postgres errors that callers turn into 409s: SQLSTATE 23505 (unique) and 23503 (foreign key). */
function sqlState(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null ? (error as { code?: string }).code : undefined;
}

/** A unique constraint refused the write (a duplicate name). */
export function isUniqueViolation(error: unknown): boolean {
  return sqlState(error) === '23505';
}

/** A foreign key refused the write (a row still referenced, or a reference to a missing row). */
export function isForeignKeyViolation(error: unknown): boolean {
  return sqlState(error) === '23503';
}
