/** `stepcal registry` — placeholder until its issue lands; it refuses clearly rather than pretending. */
import type { Command } from 'commander';
import { UserError } from '../../common/errors.ts';

export function register(program: Command): void {
  program
    .command('registry')
    .description('(not built yet)')
    .allowUnknownOption()
    .action(() => {
      throw new UserError('registry is not built yet');
    });
}
