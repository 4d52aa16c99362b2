import { NotFoundError } from '@berth/errors';
import { isUuid } from '@berth/ids';

/**
 * An id from a URL path, lower-cased as the services store it. Text that cannot be a UUID names
 * nothing: a 404 saying `notFound`, without a call to any service.
 */
export function pathUuid(value: string, notFound: string): string {
  if (!isUuid(value)) throw new NotFoundError(notFound);
  return value.toLowerCase();
}
