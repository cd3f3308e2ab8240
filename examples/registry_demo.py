"""A registry gathering three providers for one turn, printed as the model would see it."""

import asyncio

import composer


class Static:
    def __init__(self, name: str, text: str) -> None:
        self.name = name
        self.text = text

    async def provide(self, branch: composer.Branch, instruction: composer.Instruction) -> str:
        return self.text


class Broken:
    name = "broken"

    async def provide(self, branch: composer.Branch, instruction: composer.Instruction) -> str:
        raise RuntimeError("source unavailable")


async def main() -> None:
    branch = composer.Branch("You are the on-call assistant.\n", name="ops")
    branch.providers.register(Static("rules", "Answer in English.\n"), priority=100)
    branch.providers.register(Broken(), priority=50)
    branch.providers.register(Static("runbook", "Restart with `systemctl restart api`.\n"))
    turn = await composer.prepare_turn(
        branch, composer.Instruction("api is down", guidance="Be brief.")
    )
    assert turn.report is not None
    print("fired:  ", turn.report.fired)
    print("skipped:", turn.report.skipped)
    print("failed: ", turn.report.failed)
    print("--- guidance the model sees ---")
    print(turn.guidance)


if __name__ == "__main__":
    asyncio.run(main())
