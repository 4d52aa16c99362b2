/** What the Memory tab's parts share about the store. */

/** Where an item is. */
export interface ItemRef {
  namespace: string[];
  key: string;
}

/** The query cache's entries of this server's store: every write invalidates them all. */
export const storeKey = (targetKey: string) => ['studio', targetKey, 'store'] as const;

/** A namespace as its labels joined with dots (the API's own notation: a label holds no dot). */
export const dotted = (namespace: string[]) => namespace.join('.');
