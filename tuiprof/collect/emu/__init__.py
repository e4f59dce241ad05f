"""The emulator backend: PTX decoded to arrays (`decode`), run by the Numba interpreter in
`kernel/` (`run`), behind the Device protocol that launch scripts see (`device.EmuDevice`)."""
