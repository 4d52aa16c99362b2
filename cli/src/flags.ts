/**
 * Options whose values are numbers or one of a few words. Their parsers run while commander reads
 * the command line, so a bad value stops the command with a message naming the flag before
 * anything starts (a dev server with no workers, a deploy that never waits).
 */
import { Option } from 'commander';
import { CliError } from './client.js';

/** How a person wrote the flag: `-n/--workers` for `-n, --workers <count>`. */
function label(option: Option): string {
  return [option.short, option.long].filter(Boolean).join('/');
}

/** An option taking a whole number from `min` to `max`; its value is a number. */
export function integerOption(flags: string, description: string, range: { min: number; max: number }): Option {
  const option = new Option(flags, description);
  return option.argParser((value: string) => {
    const number = Number(value);
    if (!/^-?\d+$/.test(value) || number < range.min || number > range.max) {
      throw new CliError(`${label(option)} must be a whole number from ${range.min} to ${range.max}, got ${value}`);
    }
    return number;
  });
}

/** An option taking one of `choices` (listed in --help). */
export function choiceOption(flags: string, description: string, choices: readonly string[]): Option {
  // choices() lists them in --help; the parser below replaces its check to word the error like the others.
  const option = new Option(flags, description).choices(choices);
  return option.argParser((value: string) => {
    if (!choices.includes(value)) throw new CliError(`${label(option)} must be one of ${choices.join(', ')}, got ${value}`);
    return value;
  });
}
