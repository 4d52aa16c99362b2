/** Times without a zone are UTC, as LangSmith reads them. */
export function utc(text: string): Date {
  return new Date(/(Z|[+-]\d{2}:?\d{2})$/i.test(text) || !text.includes('T') ? text : `${text}Z`);
}
