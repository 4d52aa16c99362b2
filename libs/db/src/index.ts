export { assertIdentifier, createDatabase, createPool, quoteIdent, quoteLiteral } from './database.js';
export { isForeignKeyViolation, isUniqueViolation } from './pg-errors.js';
export type { Database, DatabaseOptions } from './database.js';
export { MigrationError, listMigrations, migrate, withAdvisoryLock } from './migrate.js';
export type { MigrateOptions, MigrationFile } from './migrate.js';
export { sql } from 'kysely';
export type { Kysely, RawBuilder, Selectable, Insertable, Updateable, Generated, ColumnType, Transaction } from 'kysely';
