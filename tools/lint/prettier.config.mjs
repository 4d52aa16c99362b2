// Prettier for Berth (`make format`; `make format-check` is part of `make test`): the layout of the
// code, so that review and lint need not care about it. Fitted to the style the code was written in
// (single quotes, semicolons, trailing commas, two spaces). Lines are up to 160 characters: the
// code's own width, and the one past which lines were counted too long (issue 26); at 160 it
// changed the fewest lines of the widths that end the lines over 160.
/** @type {import('prettier').Config} */
export default {
  printWidth: 160,
  singleQuote: true,
  trailingComma: 'all',
};
